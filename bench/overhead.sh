#!/usr/bin/env bash
# Measures what flamebpf costs, next to bpftrace and perf record, and prints one table.
# Run as root: bench/overhead.sh   (knobs below, by environment; see bench/README.md)
set -euo pipefail

REPEATS=${REPEATS:-5}                     # rounds of the slowdown measurement
WORK_SECONDS=${WORK_SECONDS:-12}          # baseline workload time; several flamebpf drains fall in it
FREQS=${FREQS:-"99 999"}                  # sampling frequencies, Hz
COPIES=${COPIES:-$(nproc)}                # workload copies, copy i pinned to CPU i mod nproc
RES_SECONDS=${RES_SECONDS:-10}            # flamebpf run for CPU time and peak RSS
FIRST_SAMPLE_RUNS=${FIRST_SAMPLE_RUNS:-5} # flamebpf starts per frequency for start-to-first-sample
IDLE_BUSY_PCT=${IDLE_BUSY_PCT:-10}        # the machine counts as idle below this CPU use
IDLE_TIMEOUT=${IDLE_TIMEOUT:-10}          # seconds to wait for idle before running anyway
PERF_WARMUP=${PERF_WARMUP:-0.5}           # seconds given perf record to start
WORK_ROUNDS=${WORK_ROUNDS:-}              # skips calibration when set
FLAMEBPF_ARGS=${FLAMEBPF_ARGS:-}          # extra flamebpf options, e.g. "--interval 2"

read -ra FREQ_ARR <<<"$FREQS"
read -ra FB_ARGS <<<"$FLAMEBPF_ARGS"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NCPU=$(nproc)

log() { echo "overhead: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (BPF and system-wide perf need it)"

W=$(mktemp -d /tmp/flamebpf-bench.XXXXXX)
CHILDREN=()
cleanup() {
  local pid
  for pid in "${CHILDREN[@]}"; do
    kill -INT "$pid" 2>/dev/null || true
  done
  for pid in "${CHILDREN[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$W"
  [[ -z ${stats_before:-} ]] || sysctl -qw kernel.bpf_stats_enabled="$stats_before"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

forget_child() {
  local keep=() pid
  for pid in "${CHILDREN[@]}"; do
    [[ $pid == "$1" ]] || keep+=("$pid")
  done
  CHILDREN=("${keep[@]}")
}

# --- tools ---------------------------------------------------------------------------------------

apt_updated=0
apt_install() {
  if [[ $apt_updated -eq 0 ]]; then
    apt-get update -q >&2
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}
command -v bpftrace >/dev/null || apt_install bpftrace
# Debian's /usr/bin/perf is a wrapper that fails without the perf matching the kernel.
perf --version >/dev/null 2>&1 || apt_install linux-perf
[[ -x /usr/bin/time ]] || apt_install time
command -v taskset >/dev/null || apt_install util-linux

if [[ -z ${FLAMEBPF:-} ]]; then
  # The binary scripts/run builds and runs, brought up to date.
  "$ROOT/scripts/install-deps.sh"
  "$ROOT/scripts/build.sh" run flamebpf || die "build failed; set FLAMEBPF=/path/to/flamebpf"
  FLAMEBPF=$ROOT/build/run/userspace/flamebpf
fi
[[ -x $FLAMEBPF ]] || die "no flamebpf at $FLAMEBPF"

cc -O0 -g -fno-omit-frame-pointer -o "$W/work" "$ROOT/tests/progs/burner.c"

# --- machine state -------------------------------------------------------------------------------

# Prints "total busy" jiffies since boot; steal counts as busy, since it is CPU we do not get.
cpu_jiffies() {
  local _ user nice system idle iowait irq softirq steal
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  echo "$((user + nice + system + idle + iowait + irq + softirq + steal))" \
    "$((user + nice + system + irq + softirq + steal))"
}

NOT_IDLE=0
wait_idle() {
  local deadline=$((SECONDS + IDLE_TIMEOUT)) t0 b0 t1 b1
  while :; do
    read -r t0 b0 < <(cpu_jiffies)
    sleep 0.5
    read -r t1 b1 < <(cpu_jiffies)
    if (((b1 - b0) * 100 < IDLE_BUSY_PCT * (t1 - t0))); then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      NOT_IDLE=$((NOT_IDLE + 1))
      log "warning: machine still busy after ${IDLE_TIMEOUT}s; running anyway"
      return 0
    fi
  done
}

# --- workload ------------------------------------------------------------------------------------

WORK_PIDS=()
start_workload() { # ROUNDS
  local i
  WORK_PIDS=()
  for ((i = 0; i < COPIES; i++)); do
    taskset -c $((i % NCPU)) "$W/work" --rounds "$1" >"$W/work.$i" &
    WORK_PIDS+=($!)
    CHILDREN+=($!)
  done
}

# Waits for the copies; WORK_SECS becomes the slowest one's seconds.
WORK_SECS=
finish_workload() {
  local pid i
  for pid in "${WORK_PIDS[@]}"; do
    wait "$pid"
    forget_child "$pid"
  done
  WORK_SECS=$(for ((i = 0; i < COPIES; i++)); do cat "$W/work.$i"; done | sort -g | tail -n 1)
}

kill_workload() {
  local pid
  for pid in "${WORK_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    forget_child "$pid"
  done
}

# Polls FILE for PATTERN for up to SECONDS; fails if PID exits first.
wait_for_line() { # FILE PATTERN SECONDS PID
  local deadline=$((SECONDS + $3))
  until grep -qs -- "$2" "$1"; do
    kill -0 "$4" 2>/dev/null || return 1
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# --- profilers -----------------------------------------------------------------------------------

TOOL_PID=
start_tool() { # TOOL HZ
  rm -f "$W/tool.out" "$W/tool.log" "$W/perf.data" "$W/fb.folded"
  case $1 in
  flamebpf) "$FLAMEBPF" -F "$2" -o "$W/fb.folded" -v "${FB_ARGS[@]}" >"$W/tool.out" 2>"$W/tool.log" & ;;
  bpftrace) bpftrace -e "profile:hz:$2 { @[kstack,ustack,comm]=count(); }" >"$W/tool.out" 2>"$W/tool.log" & ;;
  perf) perf record -a -g -F "$2" -o "$W/perf.data" >"$W/tool.out" 2>"$W/tool.log" & ;;
  esac
  TOOL_PID=$!
  CHILDREN+=("$TOOL_PID")
  case $1 in
  flamebpf) wait_for_line "$W/tool.log" "first sample" 15 "$TOOL_PID" ;;
  bpftrace) wait_for_line "$W/tool.out" "Attaching" 30 "$TOOL_PID" && sleep 0.2 ;; # printed just before attaching
  perf) sleep "$PERF_WARMUP" ;; # perf record prints nothing when it is ready
  esac && kill -0 "$TOOL_PID" 2>/dev/null
}

stop_tool() { # TOOL
  local alive=0 rc=0
  kill -0 "$TOOL_PID" 2>/dev/null && alive=1
  kill -INT "$TOOL_PID" 2>/dev/null || true
  wait "$TOOL_PID" || rc=$?
  forget_child "$TOOL_PID"
  if [[ $alive -eq 0 || ($1 == flamebpf && $rc -ne 0) ]]; then
    log "error: $1 died during the run (exit $rc); its log:"
    tail -n 20 "$W/tool.log" >&2
    return 1
  fi
}

# --- measurements --------------------------------------------------------------------------------

run_config() { # CONFIG (baseline | TOOL@HZ) ROUNDS; sets WORK_SECS
  local tool=${1%@*} hz=${1#*@}
  wait_idle
  if [[ $1 != baseline ]]; then
    start_tool "$tool" "$hz" || {
      log "error: $tool did not start; its log:"
      tail -n 20 "$W/tool.log" >&2
      exit 1
    }
  fi
  start_workload "$2"
  finish_workload
  [[ $1 == baseline ]] || stop_tool "$tool" || exit 1
}

if [[ -z $WORK_ROUNDS ]]; then
  # Doubles a short run until it lasts 0.5 s, then scales it to WORK_SECONDS.
  rounds=100
  while :; do
    wait_idle
    start_workload "$rounds"
    finish_workload
    if awk -v s="$WORK_SECS" 'BEGIN { exit !(s >= 0.5) }'; then
      break
    fi
    rounds=$((rounds * 2))
  done
  WORK_ROUNDS=$(awk -v r="$rounds" -v s="$WORK_SECS" -v w="$WORK_SECONDS" 'BEGIN { printf "%d", r * w / s }')
fi
log "workload: $COPIES pinned copies of $WORK_ROUNDS rounds each"

CONFIGS=(baseline)
for hz in "${FREQ_ARR[@]}"; do
  CONFIGS+=("flamebpf@$hz" "bpftrace@$hz" "perf@$hz")
done
for ((r = 0; r < REPEATS; r++)); do
  # Rotating the order spreads any drift of the machine over all configurations.
  n=${#CONFIGS[@]}
  for ((k = 0; k < n; k++)); do
    config=${CONFIGS[$(((k + r) % n))]}
    run_config "$config" "$WORK_ROUNDS"
    echo "$WORK_SECS" >>"$W/res.$config"
    log "round $((r + 1))/$REPEATS: $config ${WORK_SECS}s"
  done
done

# flamebpf's own cost and start-up, each measured while the workload keeps every CPU busy.
for hz in "${FREQ_ARR[@]}"; do
  wait_idle
  start_workload $((WORK_ROUNDS * 1000)) # outlasts the runs; killed after them
  /usr/bin/time -f '%U %S %M %e' -o "$W/time.$hz" \
    "$FLAMEBPF" -F "$hz" -d "$RES_SECONDS" -o "$W/fb.folded" "${FB_ARGS[@]}" 2>"$W/tool.log" ||
    die "flamebpf failed: $(tail -n 5 "$W/tool.log")"
  for ((i = 0; i < FIRST_SAMPLE_RUNS; i++)); do
    "$FLAMEBPF" -F "$hz" -d 0.5 -o "$W/fb.folded" -v "${FB_ARGS[@]}" 2>"$W/tool.log" ||
      die "flamebpf failed: $(tail -n 5 "$W/tool.log")"
    sed -n 's/.*first sample \([0-9.]*\) s after start.*/\1/p' "$W/tool.log" >>"$W/first.$hz"
  done
  kill_workload
  log "resources at $hz Hz: $(cat "$W/time.$hz")"
done

# In-kernel cost per sample of each tool's BPF program, from the kernel's own accounting
# (kernel.bpf_stats_enabled): exact where wall-time slowdowns drown in this machine's noise.
STATS_SECONDS=${STATS_SECONDS:-5}
STATS_ROUNDS=${STATS_ROUNDS:-3}
STATS_SAMPLES=${STATS_SAMPLES:-4000}
stats_before=$(sysctl -n kernel.bpf_stats_enabled)
restore_stats() { sysctl -qw kernel.bpf_stats_enabled="$stats_before"; }
kernel_ns_per_run() { # TOOL HZ
  wait_idle
  sysctl -qw kernel.bpf_stats_enabled=1
  start_workload $((WORK_ROUNDS * 1000))
  start_tool "$1" "$2" || die "$1 did not start: $(tail -n 5 "$W/tool.log")"
  # Long enough for STATS_SAMPLES samples: at low frequencies each sample meets cold caches and
  # the average needs more of them.
  sleep "$(awk -v s="$STATS_SECONDS" -v n="$STATS_SAMPLES" -v hz="$2" -v c="$NCPU" \
    'BEGIN { t = n / (hz * c); print (t > s) ? t : s }')"
  # Only this tool's perf_event programs are loaded now.
  bpftool prog show | awk '/ perf_event / {
      for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t += $(i + 1); if ($i == "run_cnt") c += $(i + 1) } }
    END { if (c) printf "%.0f\n", t / c }' >>"$W/kns.$1@$2"
  stop_tool "$1" || exit 1
  kill_workload
  restore_stats
}
for ((round = 1; round <= STATS_ROUNDS; round++)); do
  for hz in "${FREQ_ARR[@]}"; do
    for tool in flamebpf bpftrace; do
      kernel_ns_per_run "$tool" "$hz"
      log "round $round: in-kernel cost of $tool at $hz Hz: $(tail -n 1 "$W/kns.$tool@$hz") ns/sample"
    done
  done
done

# --- table ---------------------------------------------------------------------------------------

median_of() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
BASE=$(median_of "$W/res.baseline")

# Prints "median min max" of the slowdowns in percent.
slowdowns() {
  awk -v b="$BASE" '{ print ($1 / b - 1) * 100 }' "$W/res.$1" >"$W/slow.$1"
  echo "$(median_of "$W/slow.$1") $(sort -g "$W/slow.$1" | head -n 1) $(sort -g "$W/slow.$1" | tail -n 1)"
}
fmt_slow() { awk -v m="$1" -v lo="$2" -v hi="$3" 'BEGIN { printf "%+.1f%% [%+.1f, %+.1f]", m, lo, hi }'; }

read -r base_med noise_lo noise_hi < <(slowdowns baseline)
noise=$(awk -v lo="$noise_lo" -v hi="$noise_hi" 'BEGIN { print (hi - lo) / 2 }')

ROW_FMT="%-30s"
for _ in "${FREQ_ARR[@]}"; do ROW_FMT+=" %-24s"; done
ROW_FMT+=" %-14s %s\n"

# shellcheck disable=SC2059 # the format is built above from fixed widths
row() { printf "$ROW_FMT" "$@"; }

header=("metric")
for hz in "${FREQ_ARR[@]}"; do header+=("$hz Hz"); done
header+=("target" "met")

sampling_event="cpu-clock (software, no PMU)"
[[ -e /sys/bus/event_source/devices/cpu ]] && sampling_event="cpu-cycles (PMU)"

echo "flamebpf overhead on $(hostname): $NCPU CPUs, Linux $(uname -r), sampling $sampling_event"
echo "workload: tests/progs/burner.c --rounds, one copy pinned per CPU ($COPIES copies), fixed work; baseline $(printf %.2f "$BASE") s (median)"
echo "slowdown: workload time under the tool / median baseline - 1, median [min, max] of $REPEATS alternating rounds;"
echo "          each tool samples the whole host and is stopped after the workload ends"
echo "flamebpf CPU (user+sys, with its final write), peak RSS, start-up: flamebpf runs while the workload keeps all CPUs busy"
echo "tools: $FLAMEBPF; $(bpftrace --version 2>&1 | head -n 1); $(perf --version 2>&1 | head -n 1)"
echo
row "${header[@]}"

cells=("baseline (noise floor)")
for hz in "${FREQ_ARR[@]}"; do cells+=("$(fmt_slow "$base_med" "$noise_lo" "$noise_hi")"); done
row "${cells[@]}" "" ""

declare -A CELL MED
for tool in flamebpf bpftrace perf; do
  for hz in "${FREQ_ARR[@]}"; do
    read -r med lo hi < <(slowdowns "$tool@$hz")
    MED[$tool@$hz]=$med
    CELL[$tool@$hz]=$(fmt_slow "$med" "$lo" "$hi")
  done
done
verdicts=()
for hz in "${FREQ_ARR[@]}"; do
  verdicts+=("$hz:$(awk -v f="${MED[flamebpf@$hz]}" -v b="${MED[bpftrace@$hz]}" -v n="$noise" \
    'BEGIN { if (f <= b) print "yes"; else if (f - b <= n) print "noise"; else print "NO" }')")
done
for tool in flamebpf bpftrace perf; do
  case $tool in
  flamebpf) cells=("slowdown, flamebpf") ;;
  bpftrace) cells=("slowdown, bpftrace k+ustack") ;;
  perf) cells=("slowdown, perf record -g") ;;
  esac
  for hz in "${FREQ_ARR[@]}"; do cells+=("${CELL[$tool@$hz]}"); done
  if [[ $tool == flamebpf ]]; then
    row "${cells[@]}" "<= bpftrace's" "${verdicts[*]}"
  else
    row "${cells[@]}" "" ""
  fi
done

# Median [min-max] over STATS_ROUNDS.
kns_cells=("in-kernel ns/sample, flamebpf") kns_bt=("in-kernel ns/sample, bpftrace") kns_verdict=()
for hz in "${FREQ_ARR[@]}"; do
  f=$(median_of "$W/kns.flamebpf@$hz") b=$(median_of "$W/kns.bpftrace@$hz")
  kns_cells+=("$f ns [$(sort -g "$W/kns.flamebpf@$hz" | sed -n '1p;$p' | paste -sd-)]")
  kns_bt+=("$b ns [$(sort -g "$W/kns.bpftrace@$hz" | sed -n '1p;$p' | paste -sd-)]")
  kns_verdict+=("$hz:$(awk -v f="$f" -v b="$b" 'BEGIN { print (f + 0 <= b + 0) ? "yes" : "NO" }')")
done
row "${kns_cells[@]}" "<= bpftrace's" "${kns_verdict[*]}"
row "${kns_bt[@]}" "" ""

cells=("flamebpf CPU, ${RES_SECONDS} s run (wall)")
rss_verdict=() rss_cells=("flamebpf peak RSS, ${RES_SECONDS} s run")
first_cells=("start to first sample (med $FIRST_SAMPLE_RUNS)") first_verdict=()
for hz in "${FREQ_ARR[@]}"; do
  read -r user sys rss_kb wall <"$W/time.$hz"
  cells+=("$(awk -v u="$user" -v s="$sys" -v w="$wall" 'BEGIN { printf "%.2f s (%.1f s)", u + s, w }')")
  # The issue says MB; judged in decimal MB, the stricter reading.
  rss_cells+=("$(awk -v k="$rss_kb" 'BEGIN { printf "%.1f MB (%.1f MiB)", k * 1024 / 1e6, k / 1024 }')")
  rss_verdict+=("$hz:$(awk -v k="$rss_kb" 'BEGIN { print (k * 1024 / 1e6 < 40) ? "yes" : "NO" }')")
  if [[ -s $W/first.$hz ]]; then
    first=$(median_of "$W/first.$hz")
    first_cells+=("$(printf '%.3f s' "$first")")
    first_verdict+=("$hz:$(awk -v f="$first" 'BEGIN { print (f < 0.2) ? "yes" : "NO" }')")
  else
    first_cells+=("no first-sample line")
    first_verdict+=("$hz:NO")
  fi
done
row "${cells[@]}" "-" "-"
row "${rss_cells[@]}" "< 40 MB" "${rss_verdict[*]}"
row "${first_cells[@]}" "< 0.2 s" "${first_verdict[*]}"

echo
echo "machine not idle before $NOT_IDLE of the runs (waited ${IDLE_TIMEOUT}s, then ran anyway);" \
  "whole run took $SECONDS s"
