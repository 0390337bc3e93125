#!/usr/bin/env bash
# Measures what flamebpf costs, side by side with perf record, bpftrace and the yardstick (the
# least a stack sampler does in the kernel), and prints one table.
# Run as root: bench/overhead.sh   (knobs below, by environment; see bench/README.md)
set -euo pipefail

REPEATS=${REPEATS:-5}                     # rounds of the slowdown measurement
WORK_SECONDS=${WORK_SECONDS:-12}          # baseline workload time; several flamebpf drains fall in it
FREQS=${FREQS:-"99 999 4999"}             # sampling frequencies, Hz
COPIES=${COPIES:-$(nproc)}                # workload copies, copy i pinned to CPU i mod nproc
RES_SECONDS=${RES_SECONDS:-10}            # flamebpf run for CPU time and peak RSS
FIRST_SAMPLE_RUNS=${FIRST_SAMPLE_RUNS:-5} # flamebpf starts per frequency for start-to-first-sample
IDLE_BUSY_PCT=${IDLE_BUSY_PCT:-10}        # the machine counts as idle below this CPU use
IDLE_TIMEOUT=${IDLE_TIMEOUT:-10}          # seconds to wait for idle before running anyway
PERF_WARMUP=${PERF_WARMUP:-0.5}           # seconds given perf record to start
WORK_ROUNDS=${WORK_ROUNDS:-}              # skips calibration when set
FLAMEBPF_ARGS=${FLAMEBPF_ARGS:-}          # extra flamebpf options, e.g. "--interval 2"
AGENT_INTERVAL=${AGENT_INTERVAL:-10}      # seconds per interval of the report-cycle measurement
AGENT_INTERVALS=${AGENT_INTERVALS:-5}     # intervals of it (the first one is cold)
CFI_ONLY=${CFI_ONLY:-0}                   # 1: only the CFI-unwinding rows (a quick check of them)
FIRST_ONLY=${FIRST_ONLY:-0}               # 1: only the exec-to-first-sample rows (a quick check of them)

read -ra FREQ_ARR <<<"$FREQS"
read -ra FB_ARGS <<<"$FLAMEBPF_ARGS"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NCPU=$(nproc)

log() { echo "overhead: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "run as root (BPF and system-wide perf need it)"

W=$(mktemp -d /tmp/flamebpf-bench.XXXXXX)
CHILDREN=()
CONTAINER_PID=
cleanup() {
  local pid
  # A background job of a script ignores SIGINT: the idle container process gets SIGTERM.
  [[ -z $CONTAINER_PID ]] || { kill "$CONTAINER_PID" 2>/dev/null; wait "$CONTAINER_PID" 2>/dev/null; } || true
  # The tools stop on SIGINT; the workload's copies, background jobs too, on SIGTERM only: left
  # waited for, they would keep the run (and its cgroups) alive for good after a failure.
  for pid in "${CHILDREN[@]}"; do
    kill -INT "$pid" 2>/dev/null || true
  done
  for pid in "${WORK_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${CHILDREN[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  for cg in "${BENCH_CGROUPS[@]}"; do
    rmdir "$cg" 2>/dev/null || true
  done
  rm -rf "$W"
  [[ -z ${stats_before:-} ]] || sysctl -qw kernel.bpf_stats_enabled="$stats_before"
}
BENCH_CGROUPS=()
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

"$ROOT/scripts/install-deps.sh" --bench

if [[ -z ${FLAMEBPF:-} || -z ${YARDSTICK:-} ]]; then
  # The binary scripts/run builds and runs, brought up to date, and the yardstick beside it.
  "$ROOT/scripts/install-deps.sh"
  "$ROOT/scripts/build.sh" run flamebpf flamebpf-yardstick ||
    die "build failed; set FLAMEBPF=/path/to/flamebpf YARDSTICK=/path/to/flamebpf-yardstick"
  FLAMEBPF=${FLAMEBPF:-$ROOT/build/run/userspace/flamebpf}
  YARDSTICK=${YARDSTICK:-$ROOT/build/run/bench/yardstick/flamebpf-yardstick}
fi
[[ -x $FLAMEBPF ]] || die "no flamebpf at $FLAMEBPF"
[[ -x $YARDSTICK ]] || die "no yardstick at $YARDSTICK"

# The cgroup2 hierarchy, wherever this host mounts it.
CG2=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' \
  /proc/self/mountinfo | head -n 1)
[[ -n $CG2 ]] || die "no cgroup2 hierarchy in /proc/self/mountinfo"
# The target that holds the workload, one that holds nothing, and a container (Docker's path
# shape) with one idle process, so that --all-containers has a filter to turn samples away with.
TARGET_CG=$CG2/flamebpf-bench-target.$$
OTHER_CG=$CG2/flamebpf-bench-other.$$
CONTAINER_PARENT=$CG2/flamebpf-bench-docker.$$
CONTAINER_CG=$CONTAINER_PARENT/docker/$(head -c 32 /dev/urandom | sha256sum | cut -c1-64)
mkdir "$TARGET_CG" "$OTHER_CG" "$CONTAINER_PARENT" "$CONTAINER_PARENT/docker" "$CONTAINER_CG"
BENCH_CGROUPS=("$TARGET_CG" "$OTHER_CG" "$CONTAINER_CG" "$CONTAINER_PARENT/docker" "$CONTAINER_PARENT")
sh -c 'echo $$ >"$1/cgroup.procs" && exec sleep 100000' sh "$CONTAINER_CG" &
CONTAINER_PID=$!

cc -O0 -g -fno-omit-frame-pointer -o "$W/work" "$ROOT/tests/progs/burner.c"
# 30 frames deep (main;run;27 levels;spin), without frame pointers as distributions build code, so
# that flamebpf unwinds it from its CFI; and the same with frame pointers.
c++ -O2 -g -fomit-frame-pointer -o "$W/deep" "$ROOT/tests/progs/deep_chain.cpp"
c++ -O2 -g -fno-omit-frame-pointer -o "$W/deep-fp" "$ROOT/tests/progs/deep_chain.cpp"
# The same 30 frames in Python (tests/progs/deep_chain.py), run by Debian's CPython 3.11: flamebpf
# walks them from the interpreter's frames, which the yardstick does not see.
PYTHON=${PYTHON:-/usr/bin/python3.11}
[[ -x $PYTHON ]] || die "no CPython 3.11 at $PYTHON (Debian's python3.11)"
printf '#!/bin/sh\nexec %s %s "$@"\n' "$PYTHON" "$ROOT/tests/progs/deep_chain.py" >"$W/deep-py"
chmod +x "$W/deep-py"

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
WORK_BIN=$W/work # the workload start_workload runs: burner, deep or deep-fp
start_workload() { # ROUNDS [CGROUP]
  local i cg=${2:-}
  WORK_PIDS=()
  for ((i = 0; i < COPIES; i++)); do
    if [[ -n $cg ]]; then
      sh -c 'echo $$ >"$1/cgroup.procs" && exec taskset -c "$2" "$3" --rounds "$4"' sh \
        "$cg" $((i % NCPU)) "$WORK_BIN" "$1" >"$W/work.$i" &
    else
      taskset -c $((i % NCPU)) "$WORK_BIN" --rounds "$1" >"$W/work.$i" &
    fi
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
  rm -f "$W/tool.out" "$W/tool.log" "$W/perf.data" "$W"/fb*.folded
  case $1 in
  flamebpf) "$FLAMEBPF" -F "$2" -o "$W/fb.folded" -v "${FB_ARGS[@]}" >"$W/tool.out" 2>"$W/tool.log" & ;;
  flamebpf-in) "$FLAMEBPF" -F "$2" --cgroup "$TARGET_CG" -o "$W/fb.folded" -v "${FB_ARGS[@]}" \
    >"$W/tool.out" 2>"$W/tool.log" & ;;
  flamebpf-out) "$FLAMEBPF" -F "$2" --cgroup "$OTHER_CG" -o "$W/fb.folded" -v "${FB_ARGS[@]}" \
    >"$W/tool.out" 2>"$W/tool.log" & ;;
  flamebpf-away) "$FLAMEBPF" -F "$2" --all-containers --containers-only -o "$W/fb.folded" -v \
    "${FB_ARGS[@]}" >"$W/tool.out" 2>"$W/tool.log" & ;;
  yardstick) "$YARDSTICK" -F "$2" >"$W/tool.out" 2>"$W/tool.log" & ;;
  empty) "$YARDSTICK" -e -F "$2" >"$W/tool.out" 2>"$W/tool.log" & ;;
  bpftrace) bpftrace -e "profile:hz:$2 { @[kstack,ustack,comm]=count(); }" >"$W/tool.out" 2>"$W/tool.log" & ;;
  perf) perf record -e cpu-clock -a -g -F "$2" -o "$W/perf.data" >"$W/tool.out" 2>"$W/tool.log" & ;;
  esac
  TOOL_PID=$!
  CHILDREN+=("$TOOL_PID")
  case $1 in
  flamebpf*) wait_for_line "$W/tool.log" " Hz; BPF maps take" 15 "$TOOL_PID" ;; # events attached
  yardstick | empty) wait_for_line "$W/tool.log" "yardstick: sampling" 15 "$TOOL_PID" ;;
  bpftrace) wait_for_line "$W/tool.out" "Attaching" 30 "$TOOL_PID" && sleep 0.2 ;; # printed just before attaching
  perf) sleep "$PERF_WARMUP" ;; # perf record prints nothing when it is ready
  esac && kill -0 "$TOOL_PID" 2>/dev/null
}

stop_tool() { # TOOL
  local alive=0 rc=0
  kill -0 "$TOOL_PID" 2>/dev/null && alive=1
  kill -INT "$TOOL_PID" 2>/dev/null || true
  # A tool that ignores SIGINT (bpftrace did once, after failing to raise RLIMIT_MEMLOCK) is
  # killed after 30 s rather than waited for.
  local waited
  for ((waited = 0; waited < 300; waited++)); do
    # Gone, or exited and not yet reaped.
    [[ $(awk '{ print $3 }' "/proc/$TOOL_PID/stat" 2>/dev/null) =~ ^[^Z]$ ]] || break
    sleep 0.1
  done
  if kill -0 "$TOOL_PID" 2>/dev/null; then
    log "$1 did not exit 30 s after SIGINT: killed"
    kill -KILL "$TOOL_PID" 2>/dev/null || true
  fi
  wait "$TOOL_PID" || rc=$?
  forget_child "$TOOL_PID"
  if [[ $alive -eq 0 || ($1 == flamebpf* && $rc -ne 0) ]]; then
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
  if [[ $tool == flamebpf-in ]]; then
    start_workload "$2" "$TARGET_CG"
  else
    start_workload "$2"
  fi
  finish_workload
  [[ $1 == baseline ]] || stop_tool "$tool" || exit 1
}

# In-kernel cost per sample of each tool's BPF program, from the kernel's own accounting
# (kernel.bpf_stats_enabled): exact where wall-time slowdowns drown in this machine's noise.
# "empty" is a program that does nothing: what the accounting itself costs on this machine.
# flamebpf-away turns every sample away (every container is profiled, and none runs anything).
STATS_SECONDS=${STATS_SECONDS:-5}
STATS_ROUNDS=${STATS_ROUNDS:-3}
STATS_SAMPLES=${STATS_SAMPLES:-4000}
STATS_TOOLS=(empty yardstick flamebpf flamebpf-away bpftrace)
stats_before=$(sysctl -n kernel.bpf_stats_enabled)
restore_stats() { sysctl -qw kernel.bpf_stats_enabled="$stats_before"; }
# LONG_ROUNDS outlasts any measurement (the copies are killed after it).
kernel_ns_per_run() { # TOOL HZ [LABEL]: appends to kns.TOOL@HZ, or kns.TOOL@LABEL@HZ
  wait_idle
  sysctl -qw kernel.bpf_stats_enabled=1
  start_workload "$LONG_ROUNDS"
  start_tool "$1" "$2" || die "$1 did not start: $(tail -n 5 "$W/tool.log")"
  # Long enough for STATS_SAMPLES samples: at low frequencies each sample meets cold caches and
  # the average needs more of them.
  sleep "$(awk -v s="$STATS_SECONDS" -v n="$STATS_SAMPLES" -v hz="$2" -v c="$NCPU" \
    'BEGIN { t = n / (hz * c); print (t > s) ? t : s }')"
  # Only this tool's perf_event programs are loaded now.
  bpftool prog show | awk '/ perf_event / {
      for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t += $(i + 1); if ($i == "run_cnt") c += $(i + 1) } }
    END { if (c) printf "%.0f\n", t / c }' >>"$W/kns.$1@${3:+$3@}$2"
  stop_tool "$1" || exit 1
  kill_workload
  restore_stats
}

# In-kernel cost per sample when flamebpf unwinds 30 frames from CFI (deep, built without frame
# pointers), beside the yardstick and flamebpf on frame-pointer stacks of 5 (burner) and 30
# (deep-fp) frames; and what perf record --call-graph dwarf costs on the same workload: its own CPU
# time per sample, that of perf script (which unwinds the copied stacks afterwards), and the bytes
# of perf.data per sample. Rounds and frequencies as for the in-kernel rows above.
CFI_TOOLS=(yardstick@deep-fp flamebpf@deep-fp flamebpf@deep yardstick@deep-py flamebpf@deep-py)
measure_cfi() {
  local round hz config tool samples
  for ((round = 1; round <= STATS_ROUNDS; round++)); do
    for hz in "${FREQ_ARR[@]}"; do
      # Without the in-kernel part, its rows on burner are measured here.
      if [[ $CFI_ONLY == 1 ]]; then
        for tool in empty yardstick flamebpf; do
          kernel_ns_per_run "$tool" "$hz"
        done
      fi
      for config in "${CFI_TOOLS[@]}"; do
        WORK_BIN=$W/${config#*@}
        kernel_ns_per_run "${config%@*}" "$hz" "${config#*@}"
        log "round $round: in-kernel cost of $config at $hz Hz: $(tail -n 1 "$W/kns.${config%@*}@${config#*@}@$hz") ns/sample"
      done
      WORK_BIN=$W/deep
      wait_idle
      start_workload "$LONG_ROUNDS"
      /usr/bin/time -f '%U %S' -o "$W/perf-time" perf record -q -e cpu-clock -F "$hz" \
        --call-graph dwarf -p "$(IFS=,; echo "${WORK_PIDS[*]}")" -o "$W/perf.data" -- \
        sleep "$STATS_SECONDS" 2>"$W/tool.log" || die "perf record failed: $(tail -n 5 "$W/tool.log")"
      kill_workload
      /usr/bin/time -f '%U %S' -o "$W/perf-script-time" perf script -i "$W/perf.data" \
        -F comm,ip,sym >"$W/perf.script" 2>"$W/tool.log" || die "perf script failed: $(tail -n 5 "$W/tool.log")"
      samples=$(grep -c '^[^[:space:]]' "$W/perf.script" || true)
      # us of perf record CPU per sample, us of perf script CPU per sample, bytes per sample
      awk -v n="$samples" -v bytes="$(stat -c %s "$W/perf.data")" \
        -v rec="$(awk '{ print $1 + $2 }' "$W/perf-time")" \
        -v scr="$(awk '{ print $1 + $2 }' "$W/perf-script-time")" \
        'BEGIN { if (n) printf "%.1f %.1f %.0f\n", rec / n * 1e6, scr / n * 1e6, bytes / n }' \
        >>"$W/perfdwarf.$hz"
      log "round $round: perf record --call-graph dwarf on deep at $hz Hz, $samples samples: $(tail -n 1 "$W/perfdwarf.$hz") (us record, us script, bytes per sample)"
      WORK_BIN=$W/work
    done
  done
}

median_of() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
range_of() { sort -g "$1" | sed -n '1p;$p' | paste -sd-; }
yes_no() { awk "BEGIN { print ($1) ? \"yes\" : \"NO\" }"; }

print_cfi() {
  local hz e y f yd fd c yp fp ratio shallow rec scr bytes verdicts=() fp_verdicts=()
  echo
  echo "unwinding from CFI: tests/progs/deep_chain.cpp, 30 frames (main;run;27 levels;spin), one copy pinned per CPU;"
  echo "  deep: built -O2 -fomit-frame-pointer (flamebpf unwinds it from .eh_frame); deep-fp: the same with frame pointers;"
  echo "  in-kernel ns/sample as above, median [min-max] of $STATS_ROUNDS rounds; net = minus the empty program"
  for hz in "${FREQ_ARR[@]}"; do
    e=$(median_of "$W/kns.empty@$hz") y=$(median_of "$W/kns.yardstick@$hz")
    f=$(median_of "$W/kns.flamebpf@$hz")
    yd=$(median_of "$W/kns.yardstick@deep-fp@$hz") fd=$(median_of "$W/kns.flamebpf@deep-fp@$hz")
    c=$(median_of "$W/kns.flamebpf@deep@$hz")
    # The yardstick walks the same 30 frames by their frame pointers (deep-fp): the least an
    # in-kernel stack of that depth costs. Against its cost on burner's few frames too.
    ratio=$(awk -v e="$e" -v y="$yd" -v c="$c" 'BEGIN { printf "%.2f", (c - e) / (y - e) }')
    shallow=$(awk -v e="$e" -v y="$y" -v c="$c" 'BEGIN { printf "%.2f", (c - e) / (y - e) }')
    verdicts+=("$hz:$(yes_no "$ratio <= 3")")
    fp_verdicts+=("$hz:$(yes_no "($fd - $e) / ($yd - $e) <= 1.1")")
    printf "  %5s Hz: empty %s ns; yardstick %s ns, deep-fp %s ns; flamebpf %s ns, deep-fp %s ns [%s], deep (CFI) %s ns [%s]\n" \
      "$hz" "$e" "$y" "$yd" "$f" "$fd" "$(range_of "$W/kns.flamebpf@deep-fp@$hz")" "$c" \
      "$(range_of "$W/kns.flamebpf@deep@$hz")"
    printf "           net: CFI deep / yardstick on deep-fp %sx (target <= 3x; %sx of the yardstick on burner); deep-fp flamebpf / yardstick %sx (target <= 1.1x)\n" \
      "$ratio" "$shallow" "$(awk -v e="$e" -v y="$yd" -v f="$fd" 'BEGIN { printf "%.2f", (f - e) / (y - e) }')"
    read -r rec scr bytes < <(sort -g "$W/perfdwarf.$hz" | awk '{ r[NR] = $1; s[NR] = $2; b[NR] = $3 }
      END { m = int((NR + 1) / 2); print r[m], s[m], b[m] }')
    printf "           perf record --call-graph dwarf on deep: %s us of perf record CPU + %s us of perf script CPU, %s bytes per sample\n" \
      "$rec" "$scr" "$bytes"
    yp=$(median_of "$W/kns.yardstick@deep-py@$hz") fp=$(median_of "$W/kns.flamebpf@deep-py@$hz")
    printf "           Python deep_chain.py, 30 Python frames: flamebpf %s ns [%s], the yardstick on its native stack %s ns [%s]; net %sx the yardstick on deep-fp's 30 frames\n" \
      "$fp" "$(range_of "$W/kns.flamebpf@deep-py@$hz")" "$yp" "$(range_of "$W/kns.yardstick@deep-py@$hz")" \
      "$(awk -v e="$e" -v y="$yd" -v f="$fp" 'BEGIN { printf "%.2f", (f - e) / (y - e) }')"
  done
  echo "  CFI stacks of 30 frames within 3x the yardstick: ${verdicts[*]}; 30 frame-pointer frames within 1.1x: ${fp_verdicts[*]}"
}

ROW_FMT="%-40s"
for _ in "${FREQ_ARR[@]}"; do ROW_FMT+=" %-24s"; done
ROW_FMT+=" %-16s %s\n"

# shellcheck disable=SC2059 # the format is built above from fixed widths
row() { printf "$ROW_FMT" "$@"; }

# Start-up: from exec (stamped by a wrapper just before it) to the first sample, as the kernel
# timed it (CLOCK_MONOTONIC both), for flamebpf and the yardstick, busy (the workload keeps every
# CPU busy) and idle (one copy keeps one CPU busy, so that there is something to sample, and the
# others are free).
exec_then() { # COMMAND... ; prints "exec at T" on stderr, then runs COMMAND in its place
  python3 -c 'import os, sys, time
sys.stderr.write("exec at %.6f\n" % time.clock_gettime(time.CLOCK_MONOTONIC)); sys.stderr.flush()
os.execv(sys.argv[1], sys.argv[1:])' "$@"
}
first_sample_delay() { # LOG: seconds from exec to the first sample
  awk '/exec at / { e = $3 }
       /first sample .*monotonic/ { for (i = 1; i <= NF; i++) if ($i == "(at" || $i == "at") t = $(i + 1) }
       END { if (e && t) printf "%.4f\n", t - e }' "$1"
}
# Seconds from exec to the first sample of the unwinding program (CFI, the runtimes' frames),
# which takes over from the small frame-pointer one once the kernel has verified it.
unwinder_delay() { # LOG
  awk '/exec at / { e = $3 }
       /unwinding program takes the samples from/ { for (i = 1; i <= NF; i++) if ($i == "from") t = $(i + 1) }
       END { if (e && t) printf "%.4f\n", t - e }' "$1"
}
measure_first_samples() { # HZ LOAD: FIRST_SAMPLE_RUNS starts of each, into first.TOOL.LOAD.HZ
  local i
  for ((i = 0; i < FIRST_SAMPLE_RUNS; i++)); do
    exec_then "$FLAMEBPF" -F "$1" -d 1 -o "$W/fb.folded" -v "${FB_ARGS[@]}" 2>"$W/tool.log" ||
      die "flamebpf failed: $(tail -n 5 "$W/tool.log")"
    first_sample_delay "$W/tool.log" >>"$W/first.flamebpf.$2.$1"
    unwinder_delay "$W/tool.log" >>"$W/first.unwinder.$2.$1"
    exec_then "$YARDSTICK" -F "$1" -d 0.5 2>"$W/tool.log" ||
      die "the yardstick failed: $(tail -n 5 "$W/tool.log")"
    first_sample_delay "$W/tool.log" >>"$W/first.yardstick.$2.$1"
  done
}
measure_first_samples_alone() { # LOAD: busy (every copy) or idle (one copy), LONG_ROUNDS each
  local frequency copies=$COPIES
  [[ $1 == idle ]] && COPIES=1
  for frequency in "${FREQ_ARR[@]}"; do
    wait_idle
    start_workload "$LONG_ROUNDS"
    measure_first_samples "$frequency" "$1"
    kill_workload
  done
  COPIES=$copies
}
print_first() {
  local load target tool label cells verdicts first frequency
  for load in busy idle; do
    target=0.03
    [[ $load == idle ]] && target=0.02
    for tool in flamebpf yardstick; do
      label="exec to first sample, $tool"
      [[ $load == idle ]] && label+=", idle"
      cells=("$label") verdicts=()
      for frequency in "${FREQ_ARR[@]}"; do
        first=$(median_of "$W/first.$tool.$load.$frequency")
        cells+=("$(printf '%.3f s [%s]' "$first" "$(range_of "$W/first.$tool.$load.$frequency")")")
        verdicts+=("$frequency:$(yes_no "$first <= $target")")
      done
      if [[ $tool == flamebpf ]]; then
        row "${cells[@]}" "<= $target s" "${verdicts[*]}"
      else
        row "${cells[@]}" "" ""
      fi
    done
    label="exec to the unwinding program, flamebpf"
    [[ $load == idle ]] && label+=", idle"
    cells=("$label")
    for frequency in "${FREQ_ARR[@]}"; do
      first=$(median_of "$W/first.unwinder.$load.$frequency")
      cells+=("$(printf '%.3f s [%s]' "$first" "$(range_of "$W/first.unwinder.$load.$frequency")")")
    done
    row "${cells[@]}" "" ""
  done
}

if [[ $CFI_ONLY == 1 ]]; then
  LONG_ROUNDS=100000000
  measure_cfi
  print_cfi
  exit 0
fi

if [[ $FIRST_ONLY == 1 ]]; then
  LONG_ROUNDS=100000000
  measure_first_samples_alone busy
  measure_first_samples_alone idle
  row "metric" "${FREQ_ARR[@]/%/ Hz}" "target" "met"
  print_first
  exit 0
fi

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
LONG_ROUNDS=$((WORK_ROUNDS * 1000))

SLOW_TOOLS=(flamebpf flamebpf-in flamebpf-out yardstick bpftrace perf)
CONFIGS=(baseline)
for hz in "${FREQ_ARR[@]}"; do
  for tool in "${SLOW_TOOLS[@]}"; do CONFIGS+=("$tool@$hz"); done
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

# flamebpf's own cost, start-up and memory, each measured while the workload keeps every CPU busy;
# start-up again with one copy on one CPU.
for hz in "${FREQ_ARR[@]}"; do
  wait_idle
  start_workload $((WORK_ROUNDS * 1000)) # outlasts the runs; killed after them
  /usr/bin/time -f '%U %S %M %e' -o "$W/time.$hz" \
    "$FLAMEBPF" -F "$hz" -d "$RES_SECONDS" -v -o "$W/fb.folded" "${FB_ARGS[@]}" 2>"$W/tool.log" ||
    die "flamebpf failed: $(tail -n 5 "$W/tool.log")"
  # The last figure: the row array grows with the tables after start.
  sed -n 's/.*BPF maps take \([0-9.]*\) MiB.*/\1/p' "$W/tool.log" | tail -n 1 >"$W/maps.$hz"
  measure_first_samples "$hz" busy
  kill_workload
  log "resources at $hz Hz: $(cat "$W/time.$hz"), maps $(cat "$W/maps.$hz") MiB"
done
measure_first_samples_alone idle

# The report cycle: agent mode at 999 Hz on two busy processes (two --pid targets), every format
# but pprof; the first interval starts with empty symbol caches (cold), the others find them warm.
wait_idle
COPIES_SAVED=$COPIES
COPIES=2
start_workload $((WORK_ROUNDS * 1000))
COPIES=$COPIES_SAVED
"$FLAMEBPF" -F 999 --pid "${WORK_PIDS[0]}" --pid "${WORK_PIDS[1]}" --output-dir "$W/agent" \
  --interval "$AGENT_INTERVAL" -d $((AGENT_INTERVAL * AGENT_INTERVALS)) "${FB_ARGS[@]}" \
  2>"$W/agent.log" || die "flamebpf's agent mode failed: $(tail -n 5 "$W/agent.log")"
kill_workload
sed -n 's/.*"interval_cpu_seconds":\([0-9.]*\).*/\1/p' "$W/agent/flamebpf-stats.jsonl" >"$W/cycles"
[[ $(wc -l <"$W/cycles") -ge 2 ]] || die "agent mode wrote fewer than two intervals"
CYCLE_COLD=$(head -n 1 "$W/cycles")
tail -n +2 "$W/cycles" >"$W/cycles.warm"
log "report cycles (CPU s per ${AGENT_INTERVAL} s interval): $(paste -sd' ' "$W/cycles")"

# The same with --listen and a scraper asking for every target's next AGENT_INTERVAL - 1 seconds,
# back to back, as Alloy's pyroscope.scrape does at a scrape interval of AGENT_INTERVAL: what
# serving adds (the drains at each profile's start and end, and rendering its pprof) to the cycle.
scrape_forever() { # PORT SECONDS
  while exec 3<>"/dev/tcp/127.0.0.1/$1"; do
    printf 'GET /pprof?seconds=%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' "$2" "$1" >&3
    cat <&3 >"$W/scrape.answer"
    exec 3<&-
    head -n 1 "$W/scrape.answer" >>"$W/scraped" # the status line
  done 2>/dev/null
}
wait_idle
COPIES=2
start_workload $((WORK_ROUNDS * 1000))
COPIES=$COPIES_SAVED
"$FLAMEBPF" -F 999 --pid "${WORK_PIDS[0]}" --pid "${WORK_PIDS[1]}" --output-dir "$W/served" \
  --interval "$AGENT_INTERVAL" -d $((AGENT_INTERVAL * AGENT_INTERVALS)) --listen 127.0.0.1:0 \
  "${FB_ARGS[@]}" 2>"$W/served.log" &
served_pid=$!
CHILDREN+=($served_pid)
wait_for_line "$W/served.log" "serving the dumps" 30 "$served_pid" ||
  die "flamebpf --listen did not start: $(tail -n 5 "$W/served.log")"
port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$W/served.log" | head -n 1)
scrape_forever "$port" $((AGENT_INTERVAL - 1)) &
scraper_pid=$!
wait "$served_pid" || die "flamebpf --listen failed: $(tail -n 5 "$W/served.log")"
forget_child "$served_pid"
kill "$scraper_pid" 2>/dev/null || true
wait "$scraper_pid" 2>/dev/null || true
kill_workload
sed -n 's/.*"interval_cpu_seconds":\([0-9.]*\).*/\1/p' "$W/served/flamebpf-stats.jsonl" \
  >"$W/served.cycles"
[[ $(wc -l <"$W/served.cycles") -ge 2 ]] || die "agent mode with --listen wrote fewer than two intervals"
tail -n +2 "$W/served.cycles" >"$W/served.cycles.warm"
SCRAPES=$(grep -c '^HTTP/1.1 200' "$W/scraped" || true)
log "report cycles with a scraper (CPU s per ${AGENT_INTERVAL} s interval): $(paste -sd' ' "$W/served.cycles"), $SCRAPES profiles served"

for ((round = 1; round <= STATS_ROUNDS; round++)); do
  for hz in "${FREQ_ARR[@]}"; do
    for tool in "${STATS_TOOLS[@]}"; do
      kernel_ns_per_run "$tool" "$hz"
      log "round $round: in-kernel cost of $tool at $hz Hz: $(tail -n 1 "$W/kns.$tool@$hz") ns/sample"
    done
  done
done
measure_cfi

# --- table ---------------------------------------------------------------------------------------

BASE=$(median_of "$W/res.baseline")

# Prints "median min max" of the slowdowns in percent.
slowdowns() {
  awk -v b="$BASE" '{ print ($1 / b - 1) * 100 }' "$W/res.$1" >"$W/slow.$1"
  echo "$(median_of "$W/slow.$1") $(sort -g "$W/slow.$1" | head -n 1) $(sort -g "$W/slow.$1" | tail -n 1)"
}
fmt_slow() { awk -v m="$1" -v lo="$2" -v hi="$3" 'BEGIN { printf "%+.1f%% [%+.1f, %+.1f]", m, lo, hi }'; }

read -r base_med noise_lo noise_hi < <(slowdowns baseline)

header=("metric")
for hz in "${FREQ_ARR[@]}"; do header+=("$hz Hz"); done
header+=("target" "met")

echo "flamebpf side by side on $(hostname): $NCPU CPUs, Linux $(uname -r); every tool samples the cpu-clock software event"
echo "workload: tests/progs/burner.c --rounds, one copy pinned per CPU ($COPIES copies), fixed work; baseline $(printf %.2f "$BASE") s (median)"
echo "slowdown: workload time under the tool / median baseline - 1, median [min, max] of $REPEATS alternating rounds;"
echo "          whole host: every CPU sampled; --cgroup: flamebpf given one target cgroup, the workload inside it or outside it"
echo "in-kernel: run_time_ns / run_cnt of the tool's BPF program (kernel.bpf_stats_enabled), median [min-max] of $STATS_ROUNDS rounds;"
echo "          'empty' is a program that does nothing (the accounting's own cost), subtracted in the 'net' rows"
echo "tools: $FLAMEBPF; $YARDSTICK; $(bpftrace --version 2>&1 | head -n 1); $(perf --version 2>&1 | head -n 1)"
echo
row "${header[@]}"

cells=("baseline (noise floor)")
for hz in "${FREQ_ARR[@]}"; do cells+=("$(fmt_slow "$base_med" "$noise_lo" "$noise_hi")"); done
row "${cells[@]}" "" ""

for tool in "${SLOW_TOOLS[@]}"; do
  case $tool in
  flamebpf) cells=("slowdown, flamebpf whole host") ;;
  flamebpf-in) cells=("slowdown, flamebpf --cgroup, inside") ;;
  flamebpf-out) cells=("slowdown, flamebpf --cgroup, outside") ;;
  yardstick) cells=("slowdown, yardstick") ;;
  bpftrace) cells=("slowdown, bpftrace k+ustack") ;;
  perf) cells=("slowdown, perf record -a -g") ;;
  esac
  verdicts=()
  for hz in "${FREQ_ARR[@]}"; do
    read -r med lo hi < <(slowdowns "$tool@$hz")
    cells+=("$(fmt_slow "$med" "$lo" "$hi")")
    # Outside the target nothing is sampled: within the baseline's own spread of zero.
    [[ $tool == flamebpf-out ]] && verdicts+=("$hz:$(yes_no "$med <= $noise_hi - $base_med + 0.5")")
  done
  if [[ $tool == flamebpf-out ]]; then
    row "${cells[@]}" "~0 (noise)" "${verdicts[*]}"
  else
    row "${cells[@]}" "" ""
  fi
done

declare -A KNS
for tool in "${STATS_TOOLS[@]}"; do
  case $tool in
  empty) cells=("in-kernel ns/sample, empty program") ;;
  yardstick) cells=("in-kernel ns/sample, yardstick") ;;
  flamebpf) cells=("in-kernel ns/sample, flamebpf kept") ;;
  flamebpf-away) cells=("in-kernel ns/sample, flamebpf away") ;;
  bpftrace) cells=("in-kernel ns/sample, bpftrace") ;;
  esac
  for hz in "${FREQ_ARR[@]}"; do
    KNS[$tool@$hz]=$(median_of "$W/kns.$tool@$hz")
    cells+=("${KNS[$tool@$hz]} ns [$(range_of "$W/kns.$tool@$hz")]")
  done
  row "${cells[@]}" "" ""
done
ratio_cells=("flamebpf kept / yardstick (net)") ratio_verdict=()
away_cells=("flamebpf turned away (net)") away_verdict=()
for hz in "${FREQ_ARR[@]}"; do
  e=${KNS[empty@$hz]} y=${KNS[yardstick@$hz]} f=${KNS[flamebpf@$hz]} a=${KNS[flamebpf-away@$hz]}
  ratio=$(awk -v e="$e" -v y="$y" -v f="$f" 'BEGIN { printf "%.2f", (f - e) / (y - e) }')
  ratio_cells+=("${ratio}x")
  ratio_verdict+=("$hz:$(yes_no "$ratio <= 1.1")")
  away=$(awk -v a="$a" -v e="$e" 'BEGIN { printf "%.0f", a - e }')
  away_cells+=("$away ns")
  away_verdict+=("$hz:$(yes_no "$away < 100")")
done
row "${ratio_cells[@]}" "<= 1.1x" "${ratio_verdict[*]}"
row "${away_cells[@]}" "< 100 ns" "${away_verdict[*]}"

cells=("flamebpf CPU, ${RES_SECONDS} s run (wall)")
rss_verdict=() rss_cells=("flamebpf peak RSS, ${RES_SECONDS} s run")
maps_verdict=() maps_cells=("flamebpf BPF map memory")
for hz in "${FREQ_ARR[@]}"; do
  read -r user sys rss_kb wall <"$W/time.$hz"
  cells+=("$(awk -v u="$user" -v s="$sys" -v w="$wall" 'BEGIN { printf "%.2f s (%.1f s)", u + s, w }')")
  rss_cells+=("$(awk -v k="$rss_kb" 'BEGIN { printf "%.1f MiB", k / 1024 }')")
  rss_verdict+=("$hz:$(yes_no "$rss_kb / 1024 < 30")")
  maps=$(cat "$W/maps.$hz")
  maps_cells+=("${maps:-?} MiB")
  maps_verdict+=("$hz:$(yes_no "${maps:-99} < 24")")
done
row "${cells[@]}" "-" "-"
row "${rss_cells[@]}" "< 30 MiB" "${rss_verdict[*]}"
row "${maps_cells[@]}" "< 24 MiB" "${maps_verdict[*]}"
print_first

warm=$(median_of "$W/cycles.warm")
echo
echo "report cycle at 999 Hz, two busy processes (--pid x2), ${AGENT_INTERVAL} s intervals, folded+svg:"
printf "  CPU per interval: cold (first) %.3f s (target < 0.12: %s), warm median %.3f s [%s] (target < 0.05: %s)\n" \
  "$CYCLE_COLD" "$(yes_no "$CYCLE_COLD < 0.12")" "$warm" "$(range_of "$W/cycles.warm")" \
  "$(yes_no "$warm < 0.05")"
served_warm=$(median_of "$W/served.cycles.warm")
printf "  with --listen and a scraper taking every target's next %s s back to back (%s profiles served): warm median %.3f s [%s] (target < 0.05: %s)\n" \
  $((AGENT_INTERVAL - 1)) "$SCRAPES" "$served_warm" "$(range_of "$W/served.cycles.warm")" \
  "$(yes_no "$served_warm < 0.05")"
print_cfi

echo
echo "machine not idle before $NOT_IDLE of the runs (waited ${IDLE_TIMEOUT}s, then ran anyway);" \
  "whole run took $SECONDS s"
