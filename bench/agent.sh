#!/usr/bin/env bash
# What the always-on agent costs: flamebpf --all-containers --output-dir … at 99 Hz for MINUTES
# minutes (default 10) with intervals of 60 s and every format, on a private dockerd running two
# busy native containers and a JVM container (flamebpf-testbed). Prints flamebpf's CPU time (as a
# share of one CPU), its peak RSS, and per interval the CPU time and RSS from its stats file.
# Usage: sudo bench/agent.sh           (MINUTES=10 FREQUENCY=99 INTERVAL=60)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
minutes=${MINUTES:-10}
frequency=${FREQUENCY:-99}
interval=${INTERVAL:-60}
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/agent.sh: needs root (BPF, dockerd); run: sudo $0" >&2
  exit 1
fi
"$root/scripts/install-deps.sh" --bench
"$root/scripts/build.sh" test flamebpf flamebpf-testbed
build=$root/build/test
work=$(mktemp -d /var/tmp/flamebpf-agent-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
seconds=$((minutes * 60))

"$build/tests/flamebpf-testbed" jvm-demo --seconds "$seconds" --burners 2 -- \
  /usr/bin/time -f '%U %S %M %e' -o "$work/time" \
  "$build/userspace/flamebpf" --all-containers --output-dir "$work/dumps" --interval "$interval" \
  -F "$frequency" --format folded,svg,pprof -d "$seconds" 2>"$work/log"

read -r user system rss_kb elapsed <"$work/time"
cpu=$(echo "$user + $system" | bc -l)
printf 'flamebpf agent: %s min at %s Hz, %s s intervals, folded+svg+pprof; 2 busy native\n' \
  "$minutes" "$frequency" "$interval"
printf 'containers and a JVM container (private dockerd), 2 CPUs\n'
printf '%-36s %.2f s (user %s, sys %s) = %.2f%% of one CPU\n' "CPU time over the run" "$cpu" \
  "$user" "$system" "$(echo "100 * $cpu / $elapsed" | bc -l)"
printf '%-36s %.1f MB\n' "peak RSS" "$(echo "$rss_kb / 1000" | bc -l)"
printf '%-36s %s\n' "dumps written" "$(find "$work/dumps" -type f -name '*_*' | wc -l)"
printf '%-36s %s\n' "targets" "$(find "$work/dumps" -mindepth 1 -maxdepth 1 -type d -printf '%f ')"
echo "per interval (from flamebpf-stats.jsonl): start, samples, CPU s, RSS MB (anonymous), fds,"
echo "processes known to the kernel map / to the symbolizer, ELF files open"
python3 - "$work/dumps/flamebpf-stats.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    s = json.loads(line)
    f = s["flamebpf"]
    o = s["occupancy"]
    print(f'  {s["start"][11:19]}  {s["samples"]:6d}  {f["interval_cpu_seconds"]:6.3f}'
          f'  {f["rss_bytes"] / 1e6:6.1f} ({f["rss_anon_bytes"] / 1e6:5.1f})  {f["open_fds"]:4d}'
          f'  {o["known_images"]:5d} / {o["processes"]:5d}  {o["elf_files"]:4d}')
PY
# The JVM's attach (it starts with the agent, so it may be sampled while still starting).
grep -E 'JVM [0-9]+ ' "$work/log" | head -5 || true
grep -E 'warning|error' "$work/log" | grep -v 'JVM [0-9]' | sort | uniq -c | head -5 || true
