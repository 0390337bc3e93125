#!/usr/bin/env bash
# What flamebpf costs on a node's worth of containers (issue 35): a private dockerd running
# CONTAINERS containers, of which JVMS are JDK 17 JVMs, BUSY burn CPU and BINARIES each run one
# of as many distinct Go and C++ programs, the rest idle; flamebpf --all-containers --output-dir …
# runs MINUTES at each frequency in FREQS, and, with BASELINE or BASELINE_COMMIT, a second
# flamebpf runs the same way in alternation. One table per frequency against the issue's targets.
# Run as root: bench/scale.sh   (knobs below, by environment; see bench/README.md)
set -euo pipefail

CONTAINERS=${CONTAINERS:-250}   # containers in all, JVMs, busy and light ones included
JVMS=${JVMS:-50}                # of them JVMs (JDK 17, Ticker.java)
BUSY=${BUSY:-10}                # of them burning CPU all the time (at the lowest CPU weight)
BINARIES=${BINARIES:-20}        # distinct Go and C++ programs, one light container each
MINUTES=${MINUTES:-10}          # each flamebpf run
FREQS=${FREQS:-"19 99"}         # sampling frequencies, Hz
INTERVAL=${INTERVAL:-30}        # flamebpf's --interval, seconds
BASELINE=${BASELINE:-}          # a second flamebpf binary to run side by side
BASELINE_COMMIT=${BASELINE_COMMIT:-} # or the commit to build it from (in /var/tmp)
FLAMEBPF=${FLAMEBPF:-}          # the flamebpf under test (default: build/run's, brought up to date)
FLAMEBPF_ARGS=${FLAMEBPF_ARGS:-} # extra options for both flamebpf runs, e.g. --containers-only
RESULTS_DIR=${RESULTS_DIR:-}    # if set, each run's dumps, stats file and log are copied there
JVM_BUSY_MS=${JVM_BUSY_MS:-10}  # each JVM's work per second, ms
LIGHT_PERCENT=${LIGHT_PERCENT:-1} # each light container's share of one CPU, %
JVM_STAGGER=${JVM_STAGGER:-1}   # seconds between two JVMs' starts
SETTLE=${SETTLE:-10}            # seconds between the last JVM's start and flamebpf's
# Small and single-tiered (C1 only), so that 50 of them fit in 24 GiB and 2 CPUs.
JAVA_OPTIONS=${JAVA_OPTIONS:-"-Xms16m -Xmx64m -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1
  -XX:CICompilerCount=1 -XX:ReservedCodeCacheSize=16m -XX:MaxMetaspaceSize=48m"}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOURCES=$ROOT/bench/scale
JDK=/usr/lib/jvm/java-17-openjdk-amd64
read -ra FREQ_LIST <<<"$FREQS"
read -ra JAVA_ARGS <<<"$JAVA_OPTIONS"
read -ra EXTRA_ARGS <<<"$FLAMEBPF_ARGS"
IDLE=$((CONTAINERS - JVMS - BUSY - BINARIES))
SECONDS_PER_RUN=$((MINUTES * 60))

log() { echo "scale: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

[[ $(id -u) -eq 0 ]] || die "needs root (BPF, dockerd); run: sudo $0"
((IDLE >= 0)) || die "CONTAINERS ($CONTAINERS) is less than JVMS + BUSY + BINARIES"
((BUSY == 0 || BINARIES > 0)) || die "busy containers run the distinct programs: set BINARIES >= 1"
((${#FREQ_LIST[@]} > 0 && MINUTES > 0 && INTERVAL > 0)) ||
  die "FREQS, MINUTES and INTERVAL must be set"
[[ -z $BASELINE || -z $BASELINE_COMMIT ]] || die "give BASELINE or BASELINE_COMMIT, not both"

# Docker, the JDK, Go and a static libc come with the tests' packages, /usr/bin/time with the
# benchmarks'.
"$ROOT/scripts/install-deps.sh" --bench >&2

# --- the two flamebpf binaries --------------------------------------------------------------------

if [[ -z $FLAMEBPF ]]; then
  "$ROOT/scripts/build.sh" run flamebpf
  FLAMEBPF=$ROOT/build/run/userspace/flamebpf
fi
[[ -x $FLAMEBPF ]] || die "$FLAMEBPF is not an executable"

# The flamebpf of an older commit, built in a worktree of its own that is kept for the next run
# (remove it with git worktree remove --force <dir>).
build_baseline() {
  local commit tree
  commit=$(git -C "$ROOT" rev-parse --verify "$1^{commit}") || die "no commit $1"
  tree=/var/tmp/flamebpf-baseline-$commit
  if [[ ! -x $tree/build/run/userspace/flamebpf ]]; then
    [[ -d $tree ]] || git -C "$ROOT" worktree add --detach "$tree" "$commit" >&2
    log "building the baseline flamebpf of $commit in $tree"
    "$tree/scripts/build.sh" run flamebpf
  fi
  BASELINE=$tree/build/run/userspace/flamebpf
}
[[ -z $BASELINE_COMMIT ]] || build_baseline "$BASELINE_COMMIT"
[[ -z $BASELINE || -x $BASELINE ]] || die "$BASELINE is not an executable"

# --- clean-up -------------------------------------------------------------------------------------

WORK=$(mktemp -d /var/tmp/flamebpf-scale.XXXXXX)
DOCKER_SOCKET=$WORK/docker.sock
DOCKERD_PID=
RUN_TIME_PID=  # /usr/bin/time of the flamebpf run in progress
RUN_PID=       # that flamebpf
CONTAINER_IDS=() # full IDs of our containers
# What dockerd creates outside its roots (the cgroup parent of its containers in every hierarchy,
# plugin and shim directories) and did not exist before: removed again at the end.
CREATED_DIRS=()
for dir in /run/docker /run/docker/plugins /run/containerd \
  /run/containerd/s; do
  [[ -e $dir ]] || CREATED_DIRS+=("$dir")
done
shopt -s nullglob
for hierarchy in /sys/fs/cgroup/*/; do
  [[ -e ${hierarchy}docker ]] || CREATED_DIRS+=("${hierarchy}docker")
done
shopt -u nullglob

docker_private() {
  DOCKER_CONFIG=$WORK/client /usr/bin/docker -H "unix://$DOCKER_SOCKET" "$@"
}

stop_flamebpf_run() {
  [[ -n $RUN_TIME_PID ]] || return 0
  [[ -z $RUN_PID ]] || kill -TERM "$RUN_PID" 2>/dev/null
  wait "$RUN_TIME_PID" 2>/dev/null
  RUN_TIME_PID=
  RUN_PID=
}

cleanup() {
  set +e
  local ids id index dir
  stop_flamebpf_run
  if [[ -n $DOCKERD_PID ]] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    log "removing the containers, the images and dockerd"
    # Through dockerd first, so that dockerd and runc undo their own mounts and cgroups.
    mapfile -t ids < <(docker_private ps -aq)
    for ((index = 0; index < ${#ids[@]}; index += 50)); do
      docker_private rm -f -v "${ids[@]:index:50}" >/dev/null 2>&1
    done
    mapfile -t ids < <(docker_private images -q | sort -u)
    ((${#ids[@]} == 0)) || docker_private rmi -f "${ids[@]}" >/dev/null 2>&1
    kill -TERM "$DOCKERD_PID"
    for _ in $(seq 150); do
      kill -0 "$DOCKERD_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$DOCKERD_PID" 2>/dev/null
  fi
  # What a killed dockerd left mounted below the work directory, deepest first, so that rm -rf
  # never reaches through a mount.
  findmnt -rn -o TARGET | awk -v work="$WORK/" 'index($0, work) == 1' | sort -r |
    xargs -r -n 1 umount -l 2>/dev/null
  # The cgroups of our containers that a killed dockerd left behind; never another dockerd's.
  for dir in /sys/fs/cgroup/*/docker; do
    for id in "${CONTAINER_IDS[@]}"; do
      [[ ! -d $dir/$id ]] || rmdir "$dir/$id" 2>/dev/null
    done
  done
  # Parents last; one that another dockerd has come to use meanwhile is not empty, and stays.
  for ((index = ${#CREATED_DIRS[@]} - 1; index >= 0; index--)); do
    [[ ! -d ${CREATED_DIRS[index]} ]] || rmdir "${CREATED_DIRS[index]}" 2>/dev/null
  done
  if [[ -n $RESULTS_DIR && -d $WORK/runs ]]; then
    mkdir -p "$RESULTS_DIR" && cp -a "$WORK/runs/." "$RESULTS_DIR/" &&
      log "runs kept in $RESULTS_DIR"
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- programs and images --------------------------------------------------------------------------

# Variant n of the distinct programs: Go and C++ in turn, every other Go one stripped and every
# other C++ one keeping frame pointers (the rest are unwound from their CFI).
program_name() {
  local n=$1 tag
  tag=$(printf %02d "$n")
  case $((n % 4)) in
    1) echo "spin-go-$tag" ;;
    2) echo "spin-cpp-$tag" ;;
    3) echo "spin-gostrip-$tag" ;;
    0) echo "spin-cppfp-$tag" ;;
  esac
}

build_programs() {
  local out=$WORK/programs n tag name source
  mkdir -p "$out"
  gcc -O2 -static -s -o "$out/idle" "$SOURCES/idle.c"
  for ((n = 1; n <= BINARIES; n++)); do
    tag=$(printf %02d "$n")
    name=$(program_name "$n")
    case $name in
      spin-go*)
        source=$out/$name.go
        sed "s/VARIANT_TAG/$tag/g" "$SOURCES/spinner.go" >"$source"
        local strip=()
        [[ $name != spin-gostrip-* ]] || strip=(-ldflags=-s\ -w)
        # The Go cache the tests' Go workloads use; no module, no network.
        (cd "$out" && GOCACHE=$ROOT/build/go-cache GOPATH=$WORK/gopath GOFLAGS='' GOPROXY=off \
          CGO_ENABLED=0 go build -trimpath "${strip[@]}" -o "$out/$name" "$source")
        ;;
      spin-cpp*)
        source=$out/$name.cpp
        sed "s/VARIANT_TAG/$tag/g" "$SOURCES/spinner.cpp" >"$source"
        local frames=-fomit-frame-pointer
        [[ $name != spin-cppfp-* ]] || frames=-fno-omit-frame-pointer
        g++ -std=c++17 -O2 -g "$frames" -static-libstdc++ -static-libgcc -o "$out/$name" "$source"
        ;;
    esac
  done
  mkdir -p "$out/app"
  "$JDK/bin/javac" --release 17 -d "$out/app" "$SOURCES/Ticker.java"
}

# A root file system's start: the merged-/usr layout, a world-writable /tmp, a root user.
base_rootfs() {
  local rootfs=$1 dir
  mkdir -p "$rootfs"/{usr/bin,usr/lib/x86_64-linux-gnu,usr/lib64,etc,tmp,proc,sys,dev,root}
  for dir in bin lib lib64 sbin; do
    ln -s "usr/$dir" "$rootfs/$dir"
  done
  chmod 1777 "$rootfs/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\n' >"$rootfs/etc/group"
}

# Copies into rootfs the host's shared libraries (and loader) that the given ELF files need,
# leaving out those rootfs already holds (a JDK's own libraries).
copy_libraries() {
  local rootfs=$1 library
  shift
  # ldd fails on static programs but still lists the others' libraries; all of them static, none.
  { ldd "$@" 2>/dev/null || true; } |
    awk -v rootfs="$rootfs/" '/=> \// && index($3, rootfs) != 1 {print $3}
                              /^[ \t]*\/lib64\// && index($1, rootfs) != 1 {print $1}' | sort -u |
    while read -r library; do
      case $library in
        /lib64/* | /usr/lib64/*) cp -nL "$library" "$rootfs/usr/lib64/" ;;
        *) cp -nL "$library" "$rootfs/usr/lib/x86_64-linux-gnu/" ;;
      esac
    done
}

import_image() {
  local rootfs=$1 tag=$2
  shift 2
  local changes=() change
  for change in "$@"; do
    changes+=(--change "$change")
  done
  tar -C "$rootfs" -c . | docker_private import "${changes[@]}" - "$tag" >/dev/null
  rm -rf "$rootfs"
}

build_images() {
  local rootfs=$WORK/rootfs programs=$WORK/programs
  # Every native program in one image, as /usr/bin/<name>.
  base_rootfs "$rootfs"
  cp "$programs/idle" "$rootfs/usr/bin/"
  local n
  for ((n = 1; n <= BINARIES; n++)); do
    cp "$programs/$(program_name "$n")" "$rootfs/usr/bin/"
  done
  copy_libraries "$rootfs" "$rootfs"/usr/bin/*
  import_image "$rootfs" scale-native:latest 'ENV PATH=/usr/bin'

  # A Java runtime jlink'ed from the host's JDK 17 at /opt/java/openjdk (the eclipse-temurin
  # images' layout), with the modules the tests' JVM images have, and Ticker at /app.
  base_rootfs "$rootfs"
  mkdir -p "$rootfs/opt/java" "$rootfs/app"
  "$JDK/bin/jlink" --add-modules java.base,java.management,jdk.management,jdk.attach,jdk.jcmd \
    --no-header-files --no-man-pages --output "$rootfs/opt/java/openjdk"
  local elf_files=()
  mapfile -t elf_files < <(find "$rootfs/opt/java/openjdk" -type f \( -name '*.so' -o -perm -u+x \))
  copy_libraries "$rootfs" "${elf_files[@]}"
  cp "$programs"/app/*.class "$rootfs/app/"
  import_image "$rootfs" scale-jvm:latest 'ENV PATH=/opt/java/openjdk/bin:/usr/bin' \
    'ENV JAVA_HOME=/opt/java/openjdk' 'WORKDIR /app'
}

# --- dockerd and its containers -------------------------------------------------------------------

start_dockerd() {
  mkdir -p "$WORK/client"
  # dockerd 20.10 would otherwise create /etc/docker/key.json on the host.
  printf '{"deprecated-key-path": "%s/key.json"}\n' "$WORK" >"$WORK/daemon.json"
  # Its own session (a Ctrl-C reaches the clean-up, not dockerd), its own roots and socket, Docker's
  # own cgroup paths (/docker/<id>) and nothing on the host's network (no bridge, no NAT rules).
  setsid /usr/sbin/dockerd --data-root="$WORK/data" --exec-root="$WORK/exec" \
    --pidfile="$WORK/dockerd.pid" --host="unix://$DOCKER_SOCKET" \
    --config-file="$WORK/daemon.json" --exec-opt=native.cgroupdriver=cgroupfs \
    --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
    >"$WORK/dockerd.log" 2>&1 </dev/null &
  DOCKERD_PID=$!
  for _ in $(seq 200); do
    docker_private version >/dev/null 2>&1 && return 0
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$WORK/dockerd.log" >&2
  die "dockerd did not start"
}

# docker run -d without a registry, a network or (but for the JVMs, whose readiness is read from
# it) a log.
run_container() {
  CONTAINER_IDS+=("$(docker_private run -d --pull=never --network=none "$@")")
}

JVM_NAMES=()
start_containers() {
  local n
  log "starting $BINARIES light, $BUSY busy and $IDLE idle containers"
  for ((n = 1; n <= BINARIES; n++)); do
    run_container --log-driver=none --name "scale-light-$(printf %02d "$n")" scale-native:latest \
      "$(program_name "$n")" "$LIGHT_PERCENT"
  done
  # The lowest CPU weight: they take what the machine has spare, not the JVMs' or flamebpf's share.
  for ((n = 1; n <= BUSY; n++)); do
    run_container --log-driver=none --cpu-shares=2 --name "scale-busy-$(printf %02d "$n")" \
      scale-native:latest "$(program_name $(((n - 1) % BINARIES + 1)))" 100
  done
  for ((n = 1; n <= IDLE; n++)); do
    run_container --log-driver=none --name "scale-idle-$(printf %03d "$n")" scale-native:latest idle
  done
  # The JVMs are created here and started before each run (start_jvms).
  for ((n = 1; n <= JVMS; n++)); do
    JVM_NAMES+=("scale-jvm-$(printf %02d "$n")")
    # A fresh, exec-able /tmp at each start: the perf map and agent of the run before are gone.
    CONTAINER_IDS+=("$(docker_private create --pull=never --network=none \
      --tmpfs /tmp:rw,exec,mode=1777 --name "${JVM_NAMES[-1]}" scale-jvm:latest \
      java "${JAVA_ARGS[@]}" -cp /app Ticker "$JVM_BUSY_MS")")
  done
}

# Starts every JVM afresh, JVM_STAGGER seconds apart, and waits until each has done its first
# second's work: each run meets JVMs that no flamebpf has attached to yet.
JVM_STARTS=0
start_jvms() {
  local name _
  ((JVMS > 0)) || return 0
  log "starting $JVMS JVMs, $JVM_STAGGER s apart"
  docker_private kill "${JVM_NAMES[@]}" >/dev/null 2>&1 || true
  for name in "${JVM_NAMES[@]}"; do
    docker_private start "$name" >/dev/null
    sleep "$JVM_STAGGER"
  done
  JVM_STARTS=$((JVM_STARTS + 1))
  local ready
  for name in "${JVM_NAMES[@]}"; do
    ready=0
    for _ in $(seq 600); do
      if (($(docker_private logs "$name" 2>&1 | grep -c 'ticker ready') >= JVM_STARTS)); then
        ready=1
        break
      fi
      sleep 0.1
    done
    ((ready)) || log "warning: $name did not say it was ready within 60 s"
  done
  sleep "$SETTLE"
}

# --- one flamebpf run -----------------------------------------------------------------------------

# Runs flamebpf ($2) at $3 Hz into run directory $1 and polls, every POLL seconds, its anonymous
# memory and the memory of its BPF maps (the memlock of every map it holds: what flamebpf's
# Sampler::map_memory_bytes adds up, which it logs with -v but the stats file lacks).
POLL=2
run_flamebpf() {
  local dir=$1 binary=$2 frequency=$3
  mkdir -p "$dir"
  log "running $binary at $frequency Hz for $MINUTES min"
  /usr/bin/time -f '%U %S %M %e' -o "$dir/time" "$binary" --all-containers \
    --output-dir "$dir/dumps" --interval "$INTERVAL" --format folded,svg,pprof \
    -F "$frequency" -d "$SECONDS_PER_RUN" "${EXTRA_ARGS[@]}" 2>"$dir/log" &
  RUN_TIME_PID=$!
  for _ in $(seq 100); do
    RUN_PID=$(pgrep -P "$RUN_TIME_PID" || true)
    [[ -z $RUN_PID ]] || break
    sleep 0.05
  done
  [[ -n $RUN_PID ]] || die "flamebpf did not start: $(tail -5 "$dir/log")"
  while kill -0 "$RUN_PID" 2>/dev/null; do
    # Either may vanish as flamebpf exits.
    awk '/^RssAnon:/ {print "anon_kib", $2}' "/proc/$RUN_PID/status" >>"$dir/poll" 2>/dev/null \
      </dev/null || true
    awk 'FNR == 1 {map = 0} /^map_type:/ {map = 1} /^memlock:/ && map {sum += $2}
         END {if (NR) print "map_bytes", sum}' "/proc/$RUN_PID/fdinfo/"* >>"$dir/poll" \
      2>/dev/null </dev/null || true
    sleep "$POLL"
  done
  local status=0
  wait "$RUN_TIME_PID" || status=$?
  RUN_TIME_PID=
  RUN_PID=
  ((status == 0)) || die "flamebpf exited with $status: $(tail -5 "$dir/log")"
}

# --- the runs -------------------------------------------------------------------------------------

# A column's label: the name given and the commit the binary says it was built from.
label_of() {
  local commit
  commit=$("$1" --version 2>/dev/null |
    sed -n 's/.*commit \([0-9a-f]\{7\}\)[0-9a-f]*\(, modified\)\{0,1\}.*/\1\2/p' | head -1) || true
  echo "${2}${commit:+ $commit}"
}

build_programs
start_dockerd
log "building the images"
build_images
start_containers

binaries=("$FLAMEBPF")
roles=(candidate)
labels=("$(label_of "$FLAMEBPF" flamebpf)")
if [[ -n $BASELINE ]]; then
  binaries+=("$BASELINE")
  roles+=(baseline)
  labels+=("$(label_of "$BASELINE" baseline)")
fi
run_index=0
for frequency in "${FREQ_LIST[@]}"; do
  # In alternation: at every other frequency the baseline goes first, so that neither profits
  # from always running second (a warmer page cache, a machine quieter or busier by then).
  order=("${!binaries[@]}")
  if ((${#binaries[@]} == 2 && run_index % 2 == 1)); then
    order=(1 0)
  fi
  for which in "${order[@]}"; do
    start_jvms
    dir=$WORK/runs/$(printf %02d "$run_index")-${frequency}hz-${roles[which]}
    mkdir -p "$dir"
    printf 'role %s\nlabel %s\nfrequency %s\nminutes %s\n' "${roles[which]}" \
      "${labels[which]}" "$frequency" "$MINUTES" >"$dir/meta"
    run_flamebpf "$dir" "${binaries[which]}" "$frequency"
  done
  run_index=$((run_index + 1))
done

printf 'flamebpf --all-containers --output-dir … --interval %s --format folded,svg,pprof %s\n' \
  "$INTERVAL" "$FLAMEBPF_ARGS"
printf 'on %s containers (private dockerd): %s JVMs (JDK 17, %s ms of work a second), %s busy,\n' \
  "$CONTAINERS" "$JVMS" "$JVM_BUSY_MS" "$BUSY"
printf '%s light (%s %% of one CPU each, %s distinct Go and C++ programs), %s idle; %s CPUs\n' \
  "$BINARIES" "$LIGHT_PERCENT" "$BINARIES" "$IDLE" "$(nproc)"
python3 "$SOURCES/report.py" "$WORK/runs" "$INTERVAL" "$JVMS"
