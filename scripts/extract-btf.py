#!/usr/bin/env python3
"""Extract the raw .BTF blob from a kernel image (arm64 Image / vmlinuz).

Usage: scripts/extract-btf.py KERNEL_IMAGE OUT_BLOB

The input may be a raw Image, a gzip'd Image, or an ELF vmlinux. The output is
a raw BTF file that `bpftool btf dump file OUT_BLOB format c` accepts, so it
can be fed to scripts/gen-vmlinux.sh for a foreign-arch kernel, e.g.:

    KVER=6.1.0-56-arm64 scripts/gen-vmlinux.sh /tmp/vmlinux.btf arm64
"""
import gzip
import shutil
import struct
import subprocess
import sys
import tempfile
import os

BTF_MAGIC = b"\x9f\xeb"  # 0xEB9F little-endian
HDR = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type_off/len, str_off/len


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    # Debian's vmlinuz is either a raw Image or a gzip'd one depending on arch/signing.
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def candidates(data):
    pos = data.find(BTF_MAGIC)
    while pos != -1:
        if pos + HDR.size <= len(data):
            magic, ver, flags, hdr_len, t_off, t_len, s_off, s_len = HDR.unpack_from(data, pos)
            # Real header: v1, no flags, 24-byte header, type section before
            # strings, and everything inside the file.
            if ver == 1 and flags == 0 and hdr_len == HDR.size and t_len > 0 and s_len > 0:
                end = pos + hdr_len + max(t_off + t_len, s_off + s_len)
                if t_off + t_len <= s_off and end <= len(data):
                    yield pos, data[pos:end]
        pos = data.find(BTF_MAGIC, pos + 1)


def bpftool_accepts(blob):
    if not shutil.which("bpftool"):
        return True  # can't check; the size heuristic below still picks vmlinux BTF
    with tempfile.NamedTemporaryFile(suffix=".btf") as tmp:
        tmp.write(blob)
        tmp.flush()
        r = subprocess.run(["bpftool", "btf", "dump", "file", tmp.name],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    data = load(src)
    # The vmlinux BTF is by far the largest valid blob; try biggest first.
    for pos, blob in sorted(candidates(data), key=lambda c: -len(c[1])):
        if bpftool_accepts(blob):
            tmp = out + ".tmp"
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, out)
            print(f"BTF at offset {pos:#x}, {len(blob)} bytes -> {out}")
            return
    sys.exit(f"no valid BTF found in {src} (try the -dbg package's vmlinux ELF)")


if __name__ == "__main__":
    main()
