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

// FuzzContentionRealisticBlind searches faults a real cluster produces (one
// replica; broken watches, relists, restarts, lagging apiservers) for a lost
// plan with the blind MergeFrom patch. Its committed corpus entries are
// regression tests.
func FuzzContentionRealisticBlind(f *testing.F) {
	fuzz.Fuzz(f, contention.Realistic(contention.Blind))
}

// FuzzContentionRealisticOptimistic searches the same space with
// MergeFromWithOptimisticLock; it is expected to find nothing.
func FuzzContentionRealisticOptimistic(f *testing.F) {
	fuzz.Fuzz(f, contention.Realistic(contention.Optimistic))
}

// FuzzContentionRealisticBlindRYW searches faults a real cluster produces
// for a lost plan with the blind patch from a manager whose client has
// controller-runtime v0.25's read-your-writes consistency. Its committed
// corpus entries are regression tests: each must keep reproducing the lost
// plan (a restart onto an apiserver that has not seen the plan).
func FuzzContentionRealisticBlindRYW(f *testing.F) {
	fuzz.Fuzz(f, contention.Realistic(contention.BlindReadYourWrites))
}

// TestCorpusMeaning pins what each committed corpus entry decodes to: the
// codec may grow new spaces, never change an old one's meaning.
func TestCorpusMeaning(t *testing.T) {
	b, err := fuzz.ReadCorpusEntry("testdata/fuzz/FuzzContentionBlind/916d1b270bc67219")
	if err != nil {
		t.Fatal(err)
	}
	// Printed by the code at 4a7839b, before the Realistic space existed.
	if got, want := contention.Scenario(contention.Blind).Decode(b).String(), "replicas=1; no lag"; got != want {
		t.Errorf("%q decodes to %q; it meant %q", b, got, want)
	}
}
