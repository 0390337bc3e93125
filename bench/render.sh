#!/usr/bin/env bash
# Rendering speed: flamebpf render on a synthetic folded profile of STACKS distinct stacks of
# depth 20-60 (bench/gen-folded.py), median of RUNS runs, with the SVG's size, its frame count, its
# bytes per drawn frame and flamebpf's peak RSS. flamegraph.pl is timed too, with its SVG's bytes
# per drawn frame, when it is on PATH (it is not packaged in Debian; set
# FLAMEGRAPH_PL=/path/to/flamegraph.pl).
# Usage: bench/render.sh          (STACKS=100000 RUNS=5)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stacks=${STACKS:-100000}
runs=${RUNS:-5}
flamebpf=${FLAMEBPF:-$root/build/run/userspace/flamebpf}
"$root/scripts/install-deps.sh" --bench
[[ -n "${FLAMEBPF:-}" ]] || "$root/scripts/build.sh" run flamebpf
work=$(mktemp -d /tmp/flamebpf-render-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

python3 "$root/bench/gen-folded.py" "$stacks" 1 >"$work/in.folded"
frames=$(awk '{ sub(/ [0-9]+$/, ""); n += gsub(/;/, ";") + 1 } END { print n }' "$work/in.folded")

seconds=()
rss=()
for ((i = 0; i < runs; i++)); do
  /usr/bin/time -f '%e %M' -o "$work/time" "$flamebpf" render "$work/in.folded" -o "$work/out.svg"
  read -r s kb <"$work/time"
  seconds+=("$s")
  rss+=("$kb")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
min() { printf '%s\n' "$@" | sort -n | head -1; }
max() { printf '%s\n' "$@" | sort -n | tail -1; }

svg_bytes=$(stat -c %s "$work/out.svg")
drawn=$(grep -c '<g class="f[ "]' "$work/out.svg")
xmllint --noout "$work/out.svg" 2>/dev/null && valid=yes || valid=NO

printf 'flamebpf render: %s distinct stacks, depth 20-60, %s frames, %.1f MB of folded input\n' \
  "$stacks" "$frames" "$(echo "$(stat -c %s "$work/in.folded") / 1000000" | bc -l)"
printf '%-34s %s\n' "metric" "value"
printf '%-34s %s s [%s-%s] (median of %s)\n' "wall time" "$(median "${seconds[@]}")" \
  "$(min "${seconds[@]}")" "$(max "${seconds[@]}")" "$runs"
printf '%-34s %.1f MB\n' "SVG size" "$(echo "$svg_bytes / 1000000" | bc -l)"
printf '%-34s %s\n' "frames drawn" "$drawn"
printf '%-34s %.0f\n' "bytes per drawn frame" "$(echo "$svg_bytes / $drawn" | bc -l)"
printf '%-34s %.0f MB\n' "peak RSS (median)" "$(echo "$(median "${rss[@]}") / 1000" | bc -l)"
printf '%-34s %s\n' "well-formed (xmllint)" "$valid"
target_time=$(echo "$(median "${seconds[@]}") < 1" | bc -l)
target_size=$(echo "$svg_bytes < 10000000" | bc -l)
target_frame=$(echo "$svg_bytes <= 150 * $drawn" | bc -l)
printf '%-34s %s\n' "targets: < 1 s, < 10 MB, <= 150 B/frame" \
  "$([[ $target_time == 1 ]] && echo yes || echo NO), $([[ $target_size == 1 ]] && echo yes || echo NO), $([[ $target_frame == 1 ]] && echo yes || echo NO)"

if [[ -n "${FLAMEGRAPH_PL:-}" ]] || command -v flamegraph.pl >/dev/null; then
  pl=${FLAMEGRAPH_PL:-$(command -v flamegraph.pl)}
  /usr/bin/time -f '%e %M' -o "$work/time" "$pl" "$work/in.folded" >"$work/pl.svg"
  read -r s kb <"$work/time"
  pl_bytes=$(stat -c %s "$work/pl.svg")
  pl_drawn=$(grep -c '<title>' "$work/pl.svg")
  printf '%-34s %s s, %.0f MB RSS, %.1f MB SVG, %s frames drawn, %.0f bytes per drawn frame\n' \
    "flamegraph.pl" "$s" "$(echo "$kb / 1000" | bc -l)" "$(echo "$pl_bytes / 1000000" | bc -l)" \
    "$pl_drawn" "$(echo "$pl_bytes / $pl_drawn" | bc -l)"
fi
