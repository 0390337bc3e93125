// A Go workload of the scale benchmark (bench/scale.sh), built once per variant: bench/scale.sh
// replaces the word VARIANT_TAG by the variant's number, so that every build is a file of its own
// with its own build ID and names, as the distinct programs of a node are; some variants are
// stripped (-ldflags=-s -w), as release images ship Go programs.
//
//	spinner-<n> PERCENT   burns PERCENT % of one CPU (100: all of it) until it is stopped
//
// It works in slices of a 100 ms period through spinVARIANT_TAG;tally;hashWords, with the
// runtime's map and string code in the stacks.
package main

import (
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func hashWords(text string) uint64 {
	hash := uint64(1469598103934665603)
	for i := 0; i < len(text); i++ {
		hash = (hash ^ uint64(text[i])) * 1099511628211
	}
	return hash
}

//go:noinline
func tally(counts map[string]uint64, round int) {
	word := "word-" + strconv.Itoa(round%97) + "-VARIANT_TAG"
	counts[word] += hashWords(word)
}

//go:noinline
func spinVARIANT_TAG(until time.Time) {
	counts := make(map[string]uint64)
	for round := 0; time.Now().Before(until); round++ {
		tally(counts, round)
	}
	sink += uint64(len(counts))
}

func main() {
	percent := 100
	if len(os.Args) == 2 {
		percent, _ = strconv.Atoi(os.Args[1])
	}
	if percent < 1 || percent > 100 {
		os.Exit(2)
	}
	const period = 100 * time.Millisecond
	for {
		start := time.Now()
		spinVARIANT_TAG(start.Add(period * time.Duration(percent) / 100))
		if percent < 100 {
			time.Sleep(time.Until(start.Add(period)))
		}
	}
}
