#!/bin/sh
# Makes the variants of elf_spinner (a static program) that the hostile-ELF container tests run:
#   OUT/elf_spinner.debug     its debug file (objcopy --only-keep-debug)
#   OUT/elf_spinner.stripped  stripped of every symbol, its .gnu_debuglink naming elf_spinner.debug
#   OUT/elf_spinner.minidebug stripped, with valid MiniDebugInfo (.gnu_debugdata): its symbol
#                             table alone, xz-compressed, as Fedora ships its binaries
#   OUT/elf_spinner.xzbomb    stripped, with MiniDebugInfo (.gnu_debugdata) that is an xz bomb:
#                             40 KB that decompress to 256 MiB, its declared size hidden
#   OUT/elf_spinner.dwarfnest its symbols kept, its DWARF one unit of a million nested DIEs
#   OUT/elf_spinner.dwarfbomb its symbols kept, its .debug_info 256 MiB of 0x01 bytes (units of
#                             16 MiB each) zlib-compressed to a few hundred KB
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
objcopy --only-keep-debug --strip-debug "$binary" "$out/symbols"
xz -T1 "$out/symbols"
objcopy --strip-all --add-section .gnu_debugdata="$out/symbols.xz" "$binary" \
  "$out/elf_spinner.minidebug"
rm "$out/symbols.xz"
head -c 268435456 /dev/zero | xz -T1 -0 >"$out/bomb.xz"
# Stream padding after it hides the size its index declares: the bomb must be decoded to be
# refused, the costliest case for the reader.
printf '\000\000\000\000' >>"$out/bomb.xz"
objcopy --strip-all --add-section .gnu_debugdata="$out/bomb.xz" "$binary" "$out/elf_spinner.xzbomb"
rm "$out/bomb.xz"
# DWARF 4 abbreviation 1: a lexical block with children and no attributes.
printf '\001\013\001\000\000\000' >"$out/abbrev"
# A unit of 7 header bytes and a million DIEs, each the child of the one before.
{
  printf '\107\102\017\000\004\000\000\000\000\000\010'
  head -c 1000000 /dev/zero | tr '\000' '\001'
} >"$out/nested"
objcopy --strip-debug --add-section .debug_info="$out/nested" --add-section \
  .debug_abbrev="$out/abbrev" "$binary" "$out/elf_spinner.dwarfnest"
head -c 268435456 /dev/zero | tr '\000' '\001' >"$out/ones"
objcopy --strip-debug --add-section .debug_info="$out/ones" --add-section \
  .debug_abbrev="$out/abbrev" "$binary" "$out/uncompressed"
objcopy --compress-debug-sections=zlib "$out/uncompressed" "$out/elf_spinner.dwarfbomb"
rm "$out/abbrev" "$out/nested" "$out/ones" "$out/uncompressed"
