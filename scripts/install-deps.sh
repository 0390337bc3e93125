#!/usr/bin/env bash
# Installs, from Debian's repository, whatever flamebpf's build and tests need and this machine lacks.
# Usage: scripts/install-deps.sh [--test|--image|--seccomp|--bench]   (--test adds the packages
# only the test suite uses, --image those scripts/build-image uses, --seccomp those of the test
# suite and of scripts/seccomp-profile, --bench those of the test suite and of bench/)
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config clang libbpf-dev bpftool libelf-dev liblzma-dev
  libiberty-dev zlib1g-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler openjdk-17-jdk-headless libdebuginfod-dev libncurses-dev
  libmicrohttpd-dev nettle-dev
)
# liblzma-dev: MiniDebugInfo (.gnu_debugdata) is xz; libiberty-dev: the demangler with a bounded
# output (cplus_demangle_v3_callback); libdebuginfod-dev: elfutils' client of debuginfod servers;
# libncurses-dev: the terminal library of `flamebpf top`; libmicrohttpd-dev: the HTTP server of
# --listen; nettle-dev: SHA-256, which names the flame graph's script in the policy it is served
# with.
# openjdk-17-jdk-headless: jvmti.h for the JVM agent; its javac and jlink build the tests' Java
# images. BCC cross-checks the symbolizer; setpriv (util-linux) runs flamebpf unprivileged; docker.io
# and podman (with runc: crun refuses hybrid cgroup hosts) run the real containers of the
# container tests, each test with a private daemon or storage of its own; xmllint
# (libxml2-utils) checks every SVG the tests write; chromium runs them in tests/browser (driven by
# playwright-core from npm, which tests/browser/run.sh installs); golang-go's `go tool pprof` reads
# the pprof files; clang-19 and its runtime (libclang-rt-19-dev) build the libFuzzer targets;
# xz-utils compresses the MiniDebugInfo of the ELF fixtures; systemd's systemd-analyze checks the
# service unit; libfuse3 builds tests/progs/stall_fs, a FUSE file system that stalls; linux-perf
# is the oracle the unwinding tests compare stacks with (perf record --call-graph dwarf); libc6-dbg
# holds glibc's debug file, which names its local functions (start_thread); debuginfod is the
# server the debug-file tests fetch from; python3-kubernetes holds the Kubernetes API's object
# schemas, which deploy/kubernetes is checked against (tests/install/check_manifest.py); tmux is
# the real terminal `flamebpf top` is tested in; python3-prometheus-client's parser reads
# --listen's /metrics; libseccomp-dev builds tests/progs/seccomp_launcher, which runs a program
# (flamebpf, in the integration tests) under a seccomp profile; nodejs is the Node.js runtime
# whose JavaScript frames are named from the perf map V8 writes; python3.11-dev holds CPython
# 3.11's internal headers, against which the layout flamebpf reads CPython by is checked.
test_packages=(googletest libgtest-dev libgmock-dev libbpfcc-dev clang-format git util-linux
  docker.io containerd podman runc libxml2-utils chromium golang-go clang-19 libclang-rt-19-dev xz-utils systemd
  libfuse3-dev fuse3 linux-perf libc6-dbg debuginfod python3-kubernetes python3-yaml tmux
  python3-prometheus-client libseccomp-dev nodejs python3.11-dev)

# From Debian's backports of this release (bookworm-backports: Debian's own repository of newer
# packages, which apt never takes a package from unless asked): golang-1.23-go, a Go toolchain that
# writes the pclntab of Go 1.20 and later (Debian 12's golang-go is Go 1.19, whose layout is the
# older one); the Go tests build their workload with both.
backports_test_packages=(golang-1.23-go)

# scripts/build-image: the Docker daemon and client, and mmdebstrap for the Dockerfile's base.
image_packages=(docker.io mmdebstrap)
# scripts/seccomp-profile: bpftrace records flamebpf's system calls, seccomp's scmp_sys_resolver
# names them.
seccomp_packages=(bpftrace seccomp)
# bench/: time's /usr/bin/time measures each tool's CPU time and peak memory, and bpftrace is a
# yardstick beside flamebpf. (bench/debug-symbols.sh installs the debug packages it reads itself:
# with them, every JVM on the machine would be named from its libjvm's debug file.)
bench_packages=(time bpftrace)

wanted=("${build_packages[@]}")
backports=()
case "${1:-}" in
  --test)
    wanted+=("${test_packages[@]}" "${image_packages[@]}")
    backports=("${backports_test_packages[@]}")
    ;;
  --image) wanted+=("${image_packages[@]}") ;;
  --seccomp)
    wanted+=("${test_packages[@]}" "${image_packages[@]}" "${seccomp_packages[@]}")
    backports=("${backports_test_packages[@]}")
    ;;
  --bench)
    wanted+=("${test_packages[@]}" "${image_packages[@]}" "${bench_packages[@]}")
    backports=("${backports_test_packages[@]}")
    ;;
esac

not_installed() {
  local package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      echo "$package"
  done
}
mapfile -t missing < <(not_installed "${wanted[@]}")
mapfile -t missing_backports < <(not_installed "${backports[@]}")
[[ ${#missing[@]} -eq 0 && ${#missing_backports[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "flamebpf: missing packages ${missing[*]} ${missing_backports[*]}; run this as root (sudo) to install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [[ ${#missing_backports[@]} -gt 0 ]]; then
  # shellcheck source=/dev/null
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME}-backports")
  sources=/etc/apt/sources.list.d/flamebpf-backports.sources
  if ! grep -rqs "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\n' \
      "$suite" >"$sources"
  fi
fi
echo "flamebpf: installing ${missing[*]} ${missing_backports[*]}" >&2
apt-get update -q >&2
[[ ${#missing[@]} -eq 0 ]] || apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
[[ ${#missing_backports[@]} -eq 0 ]] ||
  apt-get install -y -q --no-install-recommends -t "$suite" "${missing_backports[@]}" >&2
