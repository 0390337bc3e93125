#!/usr/bin/env bash
# Configures (once) and builds one flavour of flamebpf incrementally; build output goes to stderr
# so that `scripts/run -o - …` keeps stdout for the profile.
# Usage: scripts/build.sh run|test|sanitize|fuzz [targets…]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
flavour=${1:?usage: scripts/build.sh run|test|sanitize|fuzz [targets…]}
shift
# CI's two builds (test and sanitize, each holding its pass of the tests: tests/CMakeLists.txt)
# keep line tables but not variables in their debug information: -g1 is 30 % quicker to compile at
# -O2 than -g, and changes no code. The run flavour, what users build, keeps full -g.
case "$flavour" in
  run) options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAMEBPF_TESTS=OFF) ;;
  test) options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAMEBPF_TESTS=ON -DFLAMEBPF_TEST_PASS=plain
                 "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG") ;;
  sanitize) options=(-DCMAKE_BUILD_TYPE=Debug -DFLAMEBPF_TESTS=ON -DFLAMEBPF_SANITIZE=ON
                     -DFLAMEBPF_TEST_PASS=sanitized -DCMAKE_C_FLAGS_DEBUG=-g1
                     -DCMAKE_CXX_FLAGS_DEBUG=-g1) ;;
  # libFuzzer is clang's; clang 19 is the first of Debian 12's that takes g++ 12's <expected>.
  fuzz) options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAMEBPF_FUZZ=ON -DCMAKE_C_COMPILER=clang-19
                 -DCMAKE_CXX_COMPILER=clang++-19) ;;
  *) echo "scripts/build.sh: unknown flavour $flavour (run, test, sanitize or fuzz)" >&2; exit 2 ;;
esac
dir="$root/build/$flavour"
# Configured again when this script's options for the flavour change.
stamp="$dir/flamebpf-configured-with"
if [[ ! -f "$dir/build.ninja" || "$(cat "$stamp" 2>/dev/null)" != "${options[*]}" ]]; then
  cmake -S "$root" -B "$dir" -G Ninja "${options[@]}" >&2
  printf '%s' "${options[*]}" >"$stamp"
fi
cmake --build "$dir" ${1:+--target "$@"} >&2
