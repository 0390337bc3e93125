#!/bin/sh
# Makes the inline_spinner variants that the tests of inlined frames read (dwarf_inlines_test.cpp)
# and profile, in OUT, from inline_spinner.c and inline_spinner_cpp.cpp (in SOURCES):
#   gcc-dwarf5          gcc -O2 -g (DWARF 5)
#   gcc-dwarf4          gcc -O2 -gdwarf-4 (.debug_ranges)
#   clang-dwarf5        clang -O2 -gdwarf-5 (strx, addrx and rnglistx forms)
#   gcc-cpp             g++ -O2 -g of the C++ variant (namespace, template, linkage names)
#   gcc-dwarf5.debug    gcc-dwarf5's debug file (objcopy --only-keep-debug)
#   gcc-dwarf5.stripped gcc-dwarf5 stripped, its .gnu_debuglink naming gcc-dwarf5.debug
#   gcc-dwarf5.zdebug   gcc-dwarf5.debug with its DWARF zlib-compressed (SHF_COMPRESSED)
#   gcc-dwarf5.nodebug  gcc-dwarf5 without its DWARF but with its .symtab, its .gnu_debuglink
#                       naming gcc-dwarf5.debug
# Usage: make-inline-spinners.sh CC CLANG CXX SOURCES OUT
set -eu
cc=$1
clang=$2
cxx=$3
sources=$4
out=$5
rm -rf "$out"
mkdir -p "$out"
flags="-O2 -fno-omit-frame-pointer -Wall -Wextra -Werror -Wl,--build-id"
$cc $flags -g -o "$out/gcc-dwarf5" "$sources/inline_spinner.c"
$cc $flags -gdwarf-4 -o "$out/gcc-dwarf4" "$sources/inline_spinner.c"
$clang $flags -gdwarf-5 -o "$out/clang-dwarf5" "$sources/inline_spinner.c"
$cxx $flags -g -o "$out/gcc-cpp" "$sources/inline_spinner_cpp.cpp"
objcopy --only-keep-debug "$out/gcc-dwarf5" "$out/gcc-dwarf5.debug"
# objcopy reads the debug file to record its CRC, so it runs beside it.
(cd "$out" && objcopy --strip-all --add-gnu-debuglink=gcc-dwarf5.debug gcc-dwarf5 \
  gcc-dwarf5.stripped && objcopy --strip-debug --add-gnu-debuglink=gcc-dwarf5.debug gcc-dwarf5 \
  gcc-dwarf5.nodebug)
objcopy --compress-debug-sections=zlib "$out/gcc-dwarf5.debug" "$out/gcc-dwarf5.zdebug"
