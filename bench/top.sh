#!/usr/bin/env bash
# What `flamebpf top` costs per refresh (interval), for 1 target and for 50 targets of 10,000
# distinct stacks each: the recording's thread makes the interval compact, the view's thread adds
# it to the model and ranks the functions (emit/top_table.h). Results go to bench/top-last-run.txt.
# Usage: bench/top.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tool=${TOP_BENCH:-$root/build/run/bench/top/flamebpf-top-bench}
[[ -n "${TOP_BENCH:-}" ]] || "$root/scripts/build.sh" run flamebpf-top-bench
{
  echo "# bench/top.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
  "$tool" 1 10000 10
  "$tool" 50 10000 6
} | tee "$root/bench/top-last-run.txt"
