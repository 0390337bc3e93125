// A Go workload with a known split: outer calls heavy and light, which both reach the frameless
// leaf spin through work, heavy with three times light's rounds. With inlining on, work is
// inlined into both; with -gcflags=-l it is a frame of its own. Runs until killed.
package main

import (
	"fmt"
	"os"
)

var sink uint64

// A leaf with no frame: Go sets up no frame pointer for it, so its caller is found only by its
// stack-pointer table.
//
//go:noinline
func spin(rounds int) uint64 {
	x := sink
	for i := 0; i < rounds; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// Small enough for Go to inline.
func work(rounds int) uint64 {
	return spin(rounds) ^ 1
}

//go:noinline
func heavy() { sink += work(3 << 20) }

//go:noinline
func light() { sink += work(1 << 20) }

//go:noinline
func outer() {
	for {
		heavy()
		light()
	}
}

func main() {
	fmt.Fprintln(os.Stderr, "ready")
	outer()
}
