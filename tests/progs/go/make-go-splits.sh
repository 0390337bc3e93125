#!/bin/sh
# Builds the Go split workload (split.go) in the forms Go binaries ship in, with each Go toolchain
# found (Debian's golang-go, and golang-1.2x-go from bookworm-backports where installed):
#   OUT/<version>/split           as `go build` makes it (symbols and DWARF)
#   OUT/<version>/split.stripped  -ldflags='-s -w', as release images ship it
#   OUT/<version>/split.noinline  -gcflags=-l: nothing inlined, every function a frame
#   OUT/<version>/split.noinline.stripped
#   OUT/<version>/split.nosections  split.stripped without its section headers (found by the
#                                   pclntab's magic)
#   OUT/<version>/split.pie       -buildmode=pie -ldflags='-s -w': Go's linker, its table in
#                                 .data.rel.ro.gopclntab, its module data filled by relocations
#   OUT/<version>/split.pie.external  the same linked by the system's linker (-linkmode=external,
#                                 as Debian's dockerd is): the table merged into .data.rel.ro
#   OUT/<version>/cgo             cgo_split.go: the leaf in C, called through cgo
# and OUT/versions, one line per toolchain: its directory name. CACHE is Go's build cache, which
# the plain and sanitized builds share (their Go programs are the same).
# Usage: make-go-splits.sh SOURCE CGO_SOURCE OUT CACHE
set -eu
source=$1
cgo_source=$2
out=$3
cache=$4
rm -rf "$out"
mkdir -p "$out"
: >"$out/versions"
for go in /usr/lib/go/bin/go /usr/lib/go-1.2*/bin/go; do
  [ -x "$go" ] || continue
  version=$("$go" env GOVERSION)
  dir=$out/$version
  [ -d "$dir" ] && continue # /usr/lib/go is a link to one of the others
  mkdir -p "$dir"
  # No module, no network, no toolchain switch; the build cache stays in the build tree.
  export GOCACHE="$cache" GOPATH="$out/gopath" GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local \
    CGO_ENABLED=0
  cp "$source" "$dir/split.go"
  (cd "$dir" &&
    "$go" build -o split split.go &&
    "$go" build -ldflags='-s -w' -o split.stripped split.go &&
    "$go" build -gcflags=-l -o split.noinline split.go &&
    "$go" build -gcflags=-l -ldflags='-s -w' -o split.noinline.stripped split.go &&
    "$go" build -buildmode=pie -ldflags='-s -w' -o split.pie split.go &&
    CGO_ENABLED=1 "$go" build -buildmode=pie -ldflags='-s -w -linkmode=external' \
      -o split.pie.external split.go)
  cp "$cgo_source" "$dir/cgo_split.go"
  (cd "$dir" && CGO_ENABLED=1 "$go" build -o cgo cgo_split.go)
  rm "$dir/split.go" "$dir/cgo_split.go"
  # Section headers dropped: e_shoff, e_shnum and e_shstrndx zeroed, as sstrip leaves a file.
  cp "$dir/split.stripped" "$dir/split.nosections"
  printf '\000\000\000\000\000\000\000\000' |
    dd of="$dir/split.nosections" bs=1 seek=40 conv=notrunc status=none
  printf '\000\000\000\000\000\000' |
    dd of="$dir/split.nosections" bs=1 seek=58 conv=notrunc status=none
  echo "$version" >>"$out/versions"
done
rm -rf "$out/gopath"
[ -s "$out/versions" ] || { echo "make-go-splits.sh: no Go toolchain found" >&2; exit 1; }
