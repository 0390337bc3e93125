#!/bin/sh
# Makes the seed corpus of fuzz_elf_symbols (its input format is in fuzz_elf_symbols.cpp): a tiny
# static program (no libc, so each seed is a few KB) with local functions, as it is, stripped
# with its debug file found each way flamebpf finds one, stripped with MiniDebugInfo, the debug
# file of another build, and a shared library with only .dynsym and MiniDebugInfo.
# Usage: tests/fuzz/make-elf-symbols-seeds.sh [OUT]   (default tests/fuzz/corpus/elf_symbols)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/corpus/elf_symbols}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >tiny.c <<'EOF'
static int __attribute__((noinline)) leaf(int n) { return n * 3 + BUILD; }
static int __attribute__((noinline)) middle(int n) { return leaf(n) ^ leaf(n + 1); }
int spin(int n) { int s = 0; for (int i = 0; i < n; ++i) s += middle(i); return s; }
void _start(void) { volatile int r = spin(1000); (void)r; for (;;) {} }
EOF
small="-Os -g -nostdlib -fno-asynchronous-unwind-tables -Wl,--build-id -Wl,-z,noseparate-code
  -Wl,-z,norelro"
# shellcheck disable=SC2086
gcc $small -static -DBUILD=1 -o tiny tiny.c
# shellcheck disable=SC2086
gcc $small -static -DBUILD=2 -o other tiny.c
# shellcheck disable=SC2086
gcc $small -shared -fPIC -DBUILD=1 -o libtiny.so tiny.c
objcopy --only-keep-debug tiny tiny.debug
objcopy --only-keep-debug other other.debug
objcopy --strip-all tiny stripped
objcopy --strip-all --add-gnu-debuglink=tiny.debug tiny linked
objcopy --only-keep-debug --strip-debug tiny symbols
xz -T1 symbols
objcopy --strip-all --add-section .gnu_debugdata=symbols.xz tiny mini
objcopy --only-keep-debug --strip-debug libtiny.so library-symbols
xz -T1 library-symbols
objcopy --strip-all --add-section .gnu_debugdata=library-symbols.xz libtiny.so library-mini

# seed NAME FLAGS FILE [DEBUG_FILE]: the flags byte, the file, then the separator (kSeparator)
# and the debug file.
seed() {
  {
    # The flags byte as an octal escape, which only a format string turns into the byte.
    # shellcheck disable=SC2059
    printf "\\$(printf %03o "$2")"
    cat "$3"
    if [ $# -eq 4 ]; then
      printf '\376\355\372\316'
      cat "$4"
    fi
  } >"$out/$1"
}
mkdir -p "$out"
seed plain 0 tiny
seed minidebuginfo 0 mini
seed library-minidebuginfo 0 library-mini
seed by-build-id 1 stripped tiny.debug
seed by-debuglink 2 linked tiny.debug
seed debuginfod 4 stripped tiny.debug
seed wrong-build-id 5 stripped other.debug
{ printf '\010'; cat symbols.xz; } >"$out/xz"
