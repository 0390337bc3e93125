#!/usr/bin/env bash
# Regenerate a vendored CO-RE vmlinux.h from kernel BTF.
#
# Usage: scripts/gen-vmlinux.sh [BTF_FILE] [ARCH]
#   BTF_FILE  defaults to /sys/kernel/btf/vmlinux (raw BTF or an ELF with .BTF)
#   ARCH      defaults to the host arch (x86 or arm64)
#   KVER      env; kernel version used in the file name, defaults to `uname -r`
#
# Writes vmlinux/<arch>/vmlinux_<kver>.h and points vmlinux/<arch>/vmlinux.h at it.
set -euo pipefail

btf_file=${1:-/sys/kernel/btf/vmlinux}
arch=${2:-}
kver=${KVER:-$(uname -r)}

if [[ -z $arch ]]; then
    case $(uname -m) in
        x86_64) arch=x86 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "unsupported host arch $(uname -m); pass ARCH explicitly" >&2; exit 1 ;;
    esac
fi

command -v bpftool >/dev/null || { echo "bpftool not found (apt-get install bpftool)" >&2; exit 1; }
[[ -r $btf_file ]] || { echo "cannot read BTF file: $btf_file" >&2; exit 1; }

# Resolve the repo root from the script location so it works from any cwd.
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out_dir=$repo_root/vmlinux/$arch
out_name=vmlinux_$kver.h
link=$out_dir/vmlinux.h
mkdir -p "$out_dir"

# Dump to a temp file in the same dir so the rename is atomic and a failed
# dump never leaves a truncated header behind.
tmp=$(mktemp "$out_dir/.vmlinux.XXXXXX")
trap 'rm -f "$tmp"' EXIT
bpftool btf dump file "$btf_file" format c >"$tmp"
chmod 644 "$tmp"
mv -f "$tmp" "$out_dir/$out_name"
trap - EXIT

old=
if [[ -L $link ]]; then
    old=$(readlink "$link")
fi

# Relative target keeps the symlink valid wherever the repo is checked out.
ln -sfn "$out_name" "$link"

# Only one versioned header per arch is kept; drop the one we just replaced.
if [[ -n $old && $old != "$out_name" && $old != */* && -f $out_dir/$old ]]; then
    rm -f "$out_dir/$old"
fi

echo "wrote vmlinux/$arch/$out_name ($(wc -l <"$out_dir/$out_name") lines); vmlinux/$arch/vmlinux.h -> $out_name"
