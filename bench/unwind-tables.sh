#!/usr/bin/env bash
# Unwind-table cost on this host: builds the table of every executable file that a running
# process maps, once per file and shared by content key as the sampler shares them, plus the
# JVMs' libjvm.so and LLVM's libLLVM (the largest libraries here, running or not), and prints processes, mappings,
# distinct files, rows, BPF map bytes, bytes of table per MB of CFI, build time and peak RSS, and
# a synthetic host of 500 processes of the 50 largest distinct binaries against 64 MiB.
# Needs root (every process's map_files). Usage: sudo bench/unwind-tables.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tables=${UNWIND_TABLES:-$root/build/run/bench/unwind-tables/flamebpf-unwind-tables}
[[ -n "${UNWIND_TABLES:-}" ]] || "$root/scripts/build.sh" run flamebpf-unwind-tables
shopt -s nullglob
extra=(/usr/lib/jvm/*/lib/server/libjvm.so /usr/lib/x86_64-linux-gnu/libLLVM*.so*)
"$tables" "${extra[@]}"
