// The Go split workload with its leaf in C: outer calls heavy and light, which both call the C
// function spin through cgo, heavy with three times light's rounds. A sample in spin has C frames
// on the thread's system stack above Go frames on the goroutine's stack. Runs until killed.
package main

/*
#include <stdint.h>

__attribute__((noinline)) static uint64_t spin(uint64_t rounds)
{
	volatile uint64_t x = 0;
	for (uint64_t i = 0; i < rounds; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}
*/
import "C"

import (
	"fmt"
	"os"
)

var sink uint64

//go:noinline
func heavy() { sink += uint64(C.spin(3 << 20)) }

//go:noinline
func light() { sink += uint64(C.spin(1 << 20)) }

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
