#!/bin/sh
# Copies an ELF file with the bytes of its .eh_frame section replaced by garbage of the same size
# (a fixed pseudo-random sequence, the same on every build), leaving .eh_frame_hdr as it was, so
# that its search table points into the garbage.
# Usage: garble-eh-frame.sh IN OUT
set -eu
in=$1
out=$2
size=$(objdump -h "$in" | awk '$2 == ".eh_frame" { print $3 }')
[ -n "$size" ] || { echo "garble-eh-frame.sh: $in has no .eh_frame" >&2; exit 1; }
bytes=$((0x$size))
garbage=$out.garbage
# sha256 of a counter, chained: 32 bytes per step.
i=0
while [ $((i * 32)) -lt "$bytes" ]; do
  printf 'eh_frame garbage %d' "$i" | sha256sum | cut -c1-64
  i=$((i + 1))
done | xxd -r -p | head -c "$bytes" >"$garbage"
objcopy --update-section .eh_frame="$garbage" "$in" "$out"
rm "$garbage"
