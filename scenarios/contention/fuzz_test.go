package contention_test

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/scenarios/contention"
)

// FuzzContentionBlind searches lag schedules for a lost plan when status is
// written with a plain MergeFrom patch. Its committed corpus entries are
// regression tests: each must keep reproducing the lost plan.
func FuzzContentionBlind(f *testing.F) { fuzz.Fuzz(f, contention.Scenario(contention.Blind)) }

// FuzzContentionOptimistic searches the same space with
// MergeFromWithOptimisticLock; it is expected to find nothing.
func FuzzContentionOptimistic(f *testing.F) {
	fuzz.Fuzz(f, contention.Scenario(contention.Optimistic))
}
