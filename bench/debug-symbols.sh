#!/usr/bin/env bash
# What debug files cost flamebpf's symbolizer: reads the symbols of glibc (named from libc6-dbg)
# and of the JDK's libjvm.so debug file (openjdk-17-dbg, installed here if missing:
# 240 MB from Debian), as flamebpf reads them, and prints the memory they hold and the
# resident memory they add, per file and per 100 MB of debug file read; then the inline index
# flamebpf builds from each file's DWARF in the background: its ranges, the bytes it holds, the
# peak of resident memory while it is built (bounded by kMaxInlineBuildBytes, past which units are
# left unread) and the time it takes.
# Usage: sudo bench/debug-symbols.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tool=${DEBUG_SYMBOLS:-$root/build/run/bench/debug-symbols/flamebpf-debug-symbols}
"$root/scripts/install-deps.sh" --bench
[[ -n "${DEBUG_SYMBOLS:-}" ]] || "$root/scripts/build.sh" run flamebpf-debug-symbols
for package in libc6-dbg openjdk-17-dbg; do
  dpkg -s "$package" >/dev/null 2>&1 ||
    apt-get install -y -q --no-install-recommends "$package" >/dev/null
done
# The three largest debug files of the JDK (libjvm.so's first), read as a stripped file's debug
# file is read.
mapfile -t jdk_debug < <(dpkg -L openjdk-17-dbg | grep -E '\.debug$' | xargs ls -S)
"$tool" /lib/x86_64-linux-gnu/libc.so.6 "${jdk_debug[@]:0:3}"
