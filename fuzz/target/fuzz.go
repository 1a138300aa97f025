package target

import (
	"context"
	"os"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// Fuzz is the whole fuzz target for a target file:
//
//	func FuzzMine(f *testing.F) { target.Fuzz(f, "target.yaml") }
//
// It loads the file (refusing one with errors before anything starts),
// prepares it (builds its Go controllers once, in the coordinator and in
// every worker alike; a cached build costs nothing) and runs fuzz.Fuzz on
// its Scenario.
func Fuzz(f *testing.F, path string) {
	f.Helper()
	t, err := Load(path)
	if err != nil {
		f.Fatal(err)
	}
	if err := Prepare(context.Background(), t, os.Stderr); err != nil {
		f.Fatal(err)
	}
	s, err := t.Scenario()
	if err != nil {
		f.Fatal(err)
	}
	fuzz.Fuzz(f, s)
}
