#!/bin/sh
# Splits the debug symbols off a fixture library three ways, for the ElfSymbols tests:
#   OUT/debuglink/libfixture.so  stripped, .gnu_debuglink naming libfixture.so.debug beside it
#   OUT/buildid/libfixture.so    stripped; its debug file under OUT/buildid/usr/lib/debug/.build-id
#   OUT/stripped/libfixture.so   stripped, with no debug file anywhere
# Usage: make-debug-fixtures.sh LIBRARY OUT
set -eu
library=$1
out=$2
rm -rf "$out"
mkdir -p "$out/debuglink" "$out/buildid" "$out/stripped"

objcopy --only-keep-debug "$library" "$out/debuglink/libfixture.so.debug"
# objcopy reads the debug file to record its CRC, so it runs beside it.
(cd "$out/debuglink" && objcopy --strip-all --add-gnu-debuglink=libfixture.so.debug \
  "$library" libfixture.so)

build_id=$(readelf -n "$library" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$build_id" ] || { echo "make-debug-fixtures.sh: $library has no build ID" >&2; exit 1; }
id_dir=$out/buildid/usr/lib/debug/.build-id/$(echo "$build_id" | cut -c1-2)
mkdir -p "$id_dir"
objcopy --only-keep-debug "$library" "$id_dir/$(echo "$build_id" | cut -c3-).debug"
objcopy --strip-all "$library" "$out/buildid/libfixture.so"

objcopy --strip-all "$library" "$out/stripped/libfixture.so"
