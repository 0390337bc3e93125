#!/bin/sh
# Splits the debug symbols off a fixture library in the ways the ElfSymbols tests need:
#   OUT/debuglink/libfixture.so  stripped, .gnu_debuglink naming libfixture.so.debug beside it
#   OUT/buildid/libfixture.so    stripped; its debug file under OUT/buildid/usr/lib/debug/.build-id
#   OUT/stripped/libfixture.so   stripped, with no debug file anywhere
# and debug roots (a root holds lib/libfixture.so, stripped, with a build ID and a link):
#   OUT/dotdebug         the debug file in lib/.debug/
#   OUT/usrdebug         the debug file in usr/lib/debug/lib/
#   OUT/both             a debug file by build ID and another one beside the library
#   OUT/wrongid          OTHER's debug file at the library's build-ID path, the right one beside
#   OUT/badcrc           beside the library, a debug file that is not the one its link names
# and MiniDebugInfo (the library stripped, with .gnu_debugdata):
#   OUT/mini/libfixture.so       the symbols .dynsym lacks, as Fedora's find-debuginfo makes them
#   OUT/xzbomb/libfixture.so     64 MiB of zeros
# and xz data: OUT/xz/small.xz (the library), OUT/xz/bomb.xz (64 MiB of zeros),
# OUT/xz/bigdict.xz (needs a 192 MiB dictionary), OUT/xz/garbage.xz.
# Usage: make-debug-fixtures.sh LIBRARY OTHER OUT
set -eu
library=$1
other=$2
out=$3
rm -rf "$out"
mkdir -p "$out/debuglink" "$out/buildid" "$out/stripped" "$out/mini" "$out/xzbomb" "$out/xz"

build_id_path() { # the path of $1's debug file below a root, by build ID
  id=$(readelf -n "$1" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
  [ -n "$id" ] || { echo "make-debug-fixtures.sh: $1 has no build ID" >&2; exit 1; }
  echo "usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
}

objcopy --only-keep-debug "$library" "$out/debuglink/libfixture.so.debug"
# objcopy reads the debug file to record its CRC, so it runs beside it.
(cd "$out/debuglink" && objcopy --strip-all --add-gnu-debuglink=libfixture.so.debug \
  "$library" libfixture.so)

by_id=$(build_id_path "$library")
mkdir -p "$out/buildid/$(dirname "$by_id")"
objcopy --only-keep-debug "$library" "$out/buildid/$by_id"
objcopy --strip-all "$library" "$out/buildid/libfixture.so"

objcopy --strip-all "$library" "$out/stripped/libfixture.so"

# Roots: each holds lib/libfixture.so, linked to libfixture.so.debug, with its build ID.
for root in dotdebug usrdebug both wrongid badcrc; do
  mkdir -p "$out/$root/lib"
  cp "$out/debuglink/libfixture.so" "$out/$root/lib/libfixture.so"
done
mkdir -p "$out/dotdebug/lib/.debug" "$out/usrdebug/usr/lib/debug/lib"
cp "$out/debuglink/libfixture.so.debug" "$out/dotdebug/lib/.debug/"
cp "$out/debuglink/libfixture.so.debug" "$out/usrdebug/usr/lib/debug/lib/"
for root in both wrongid; do
  mkdir -p "$out/$root/$(dirname "$by_id")"
  cp "$out/debuglink/libfixture.so.debug" "$out/$root/lib/"
done
cp "$out/debuglink/libfixture.so.debug" "$out/both/$by_id"
objcopy --only-keep-debug "$other" "$out/wrongid/$by_id"
# The same debug file with one more byte: a valid ELF file, but not the CRC the link states.
cp "$out/debuglink/libfixture.so.debug" "$out/badcrc/lib/"
printf x >>"$out/badcrc/lib/libfixture.so.debug"

# MiniDebugInfo: the function symbols of .symtab that .dynsym lacks, in an xz'd ELF file.
scratch=$out/mini/scratch
mkdir -p "$scratch"
nm -D "$library" --format=posix --defined-only | awk '{ print $1 }' | sort >"$scratch/dynamic"
nm "$library" --format=posix --defined-only | awk '$2 == "T" || $2 == "t" { print $1 }' |
  sort >"$scratch/functions"
comm -13 "$scratch/dynamic" "$scratch/functions" >"$scratch/kept"
objcopy --only-keep-debug "$library" "$scratch/debug"
objcopy -S --remove-section .gdb_index --remove-section .comment \
  --keep-symbols="$scratch/kept" "$scratch/debug" "$scratch/mini"
xz -T1 "$scratch/mini"
objcopy --strip-all --add-section .gnu_debugdata="$scratch/mini.xz" "$library" \
  "$out/mini/libfixture.so"
rm -r "$scratch"

head -c 67108864 /dev/zero | xz -T1 -6 >"$out/xz/bomb.xz"
objcopy --strip-all --add-section .gnu_debugdata="$out/xz/bomb.xz" "$library" \
  "$out/xzbomb/libfixture.so"
xz -T1 -c "$library" >"$out/xz/small.xz"
xz -T1 -c --lzma2=preset=6,dict=192MiB "$library" >"$out/xz/bigdict.xz"
head -c 4096 "$library" >"$out/xz/garbage.xz"
