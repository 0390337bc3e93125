#!/bin/sh
# Makes the variants of elf_spinner (a static program) that the hostile-ELF container tests run:
#   OUT/elf_spinner.debug     its debug file (objcopy --only-keep-debug)
#   OUT/elf_spinner.stripped  stripped of every symbol, its .gnu_debuglink naming elf_spinner.debug
#   OUT/elf_spinner.xzbomb    stripped, with MiniDebugInfo (.gnu_debugdata) that is an xz bomb:
#                             40 KB that decompress to 256 MiB, its declared size hidden
# Usage: make-elf-spinners.sh ELF_SPINNER OUT
set -eu
binary=$1
out=$2
rm -rf "$out"
mkdir -p "$out"
objcopy --only-keep-debug "$binary" "$out/elf_spinner.debug"
# objcopy reads the debug file to record its CRC, so it runs beside it.
(cd "$out" && objcopy --strip-all --add-gnu-debuglink=elf_spinner.debug "$binary" \
  elf_spinner.stripped)
head -c 268435456 /dev/zero | xz -T1 -0 >"$out/bomb.xz"
# Stream padding after it hides the size its index declares: the bomb must be decoded to be
# refused, the costliest case for the reader.
printf '\000\000\000\000' >>"$out/bomb.xz"
objcopy --strip-all --add-section .gnu_debugdata="$out/bomb.xz" "$binary" "$out/elf_spinner.xzbomb"
rm "$out/bomb.xz"
