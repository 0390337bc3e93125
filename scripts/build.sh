#!/usr/bin/env bash
# Configures (once) and builds one flavour of flamebpf incrementally; build output goes to stderr
# so that `scripts/run -o - …` keeps stdout for the profile.
# Usage: scripts/build.sh run|test|sanitize|fuzz [targets…]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
flavour=${1:?usage: scripts/build.sh run|test|sanitize|fuzz [targets…]}
shift
case "$flavour" in
  run) options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAMEBPF_TESTS=OFF) ;;
  test) options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAMEBPF_TESTS=ON) ;;
  sanitize) options=(-DCMAKE_BUILD_TYPE=Debug -DFLAMEBPF_TESTS=ON -DFLAMEBPF_SANITIZE=ON) ;;
  # libFuzzer is clang's; clang 19 is the first of Debian 12's that takes g++ 12's <expected>.
  fuzz) options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAMEBPF_FUZZ=ON -DCMAKE_C_COMPILER=clang-19
                 -DCMAKE_CXX_COMPILER=clang++-19) ;;
  *) echo "scripts/build.sh: unknown flavour $flavour (run, test, sanitize or fuzz)" >&2; exit 2 ;;
esac
dir="$root/build/$flavour"
if [[ ! -f "$dir/build.ninja" ]]; then
  cmake -S "$root" -B "$dir" -G Ninja "${options[@]}" >&2
fi
cmake --build "$dir" ${1:+--target "$@"} >&2
