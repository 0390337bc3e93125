#!/usr/bin/env bash
# What Go binaries' own tables cost flamebpf, on this host's Go programs (containerd, dockerd,
# docker, ctr, runc, a shim, podman, Go's compilers, and kubectl where one is installed) and the
# tests' split workload, position-independent too: the table found and checked, names, unwind
# rows, inline trees and memory (bench/go-pclntab), side by side with Go's own reader of the same
# table (`go tool addr2line`, debug/gosym, asked one address), and what 30 such daemons' rows take
# of the unwind tables' map budget (--unwind-memory, 32 MiB).
# Usage: bench/go-pclntab.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" run flamebpf-go-pclntab >/dev/null
tool=$root/build/run/bench/go-pclntab/flamebpf-go-pclntab
files=()
for file in /usr/bin/containerd /usr/sbin/dockerd /usr/bin/docker /usr/bin/ctr /usr/sbin/runc \
  /usr/bin/containerd-shim-runc-v2 /usr/bin/podman /usr/local/bin/kubectl /usr/bin/kubectl \
  /usr/lib/go-1.19/pkg/tool/linux_amd64/compile /usr/lib/go-1.23/pkg/tool/linux_amd64/compile \
  "$root"/build/test/tests/go_splits/*/split.stripped \
  "$root"/build/test/tests/go_splits/*/split.pie.external; do
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
awk '/^\// { file = $1 } / with Go.s \(/ { rows += $6; n++; if (file ~ /containerd:/) own = $6 }
  END {
  if (own) printf "30 daemons of containerd'"'"'s size: %.1f MiB of unwind map (budget 32 MiB)\n",
    30 * own * 8 / 1048576
  if (n) printf "30 daemons of these files'"'"' mean size: %.1f MiB of unwind map (budget 32 MiB)\n",
    30 * rows / n * 8 / 1048576 }' /tmp/go-pclntab.$$
rm -f /tmp/go-pclntab.$$
