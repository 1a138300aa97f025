package driver

import (
	"os"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

func FuzzTarget(f *testing.F) {
	path := os.Getenv("STALEFUZZ_TARGET")
	if path == "" {
		f.Skip("STALEFUZZ_TARGET is not set: this fuzz target is run by stalefuzz fuzz and stalefuzz replay")
	}
	target.Fuzz(f, path)
}
