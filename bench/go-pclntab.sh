#!/usr/bin/env bash
# What Go binaries' own tables cost flamebpf, on this host's largest Go programs (containerd,
# dockerd, podman, and kubectl where one is installed) and the tests' split workload: the table
# found and checked, names, unwind rows, inline index and memory (bench/go-pclntab), side by side
# with Go's own reader of the same table (`go tool addr2line`, debug/gosym, asked one address),
# and what 30 such daemons' rows take of the unwind tables' map budget (--unwind-memory, 32 MiB).
# Usage: bench/go-pclntab.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" run flamebpf-go-pclntab >/dev/null
tool=$root/build/run/bench/go-pclntab/flamebpf-go-pclntab
files=()
for file in /usr/bin/containerd /usr/sbin/dockerd /usr/bin/podman /usr/local/bin/kubectl \
  /usr/bin/kubectl "$root"/build/test/tests/go_splits/*/split.stripped; do
  [[ -f $file ]] && files+=("$file")
done
"$tool" "${files[@]}" | tee /tmp/go-pclntab.$$
for file in "${files[@]}"; do
  start=$(date +%s.%N)
  echo 0x401000 | go tool addr2line "$file" >/dev/null 2>&1 || true
  end=$(date +%s.%N)
  printf '%s: go tool addr2line (Go'"'"'s debug/gosym over the whole table) %.3f s\n' "$file" \
    "$(echo "$end - $start" | bc)"
done
awk '/ with Go.s \(/ { rows += $6; n++ } END {
  if (n) printf "30 daemons of these files'"'"' mean size: %.1f MiB of unwind map (budget 32 MiB)\n",
    30 * rows / n * 8 / 1048576 }' /tmp/go-pclntab.$$
rm -f /tmp/go-pclntab.$$
