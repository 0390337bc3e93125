#!/bin/sh
# Builds the Rust split workload (split.rs) as `cargo build --release` builds a program (-O, no
# frame pointers, the linker rustc picks), with each symbol mangling:
#   OUT/split.legacy  legacy mangling (_ZN...17h<hash>E), the default
#   OUT/split.v0      -C symbol-mangling-version=v0 (_R...)
# with the rustc of rustup (~/.cargo/bin) if there is one, else Debian's.
# Usage: make-rust-splits.sh SOURCE OUT
set -eu
source=$1
out=$2
rustc=$HOME/.cargo/bin/rustc
[ -x "$rustc" ] || rustc=$(command -v rustc)
rm -rf "$out"
mkdir -p "$out"
"$rustc" -O -o "$out/split.legacy" "$source"
"$rustc" -O -C symbol-mangling-version=v0 -o "$out/split.v0" "$source"
"$rustc" --version >"$out/version"
