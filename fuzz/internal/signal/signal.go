// Package signal turns execution features into Go fuzzing coverage.
//
// go test -fuzz keeps an input when it reaches code no earlier input reached.
// In-process controllers give noisy coverage (informer goroutines run on their
// own schedule) and out-of-process controllers give none, so the engine maps
// each feature of an execution's trace (a client's write verb and status code,
// a bucketed 409 count, the oracle phase reached) to one of Slots distinct
// basic blocks: new behaviour then counts as new coverage. Features are hashed
// to slots; a collision merely merges two features.
//
// Package signal reads no environment variables.
package signal

//go:generate go run gen.go

import "hash/fnv"

// sink keeps each case's body from being optimised away.
var sink uint32

// Hit marks each feature's slot as covered.
func Hit(features []string) {
	for _, f := range features {
		h := fnv.New32a()
		h.Write([]byte(f))
		hit(h.Sum32() % Slots)
	}
}
