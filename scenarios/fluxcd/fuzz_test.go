package fluxcd_test

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/scenarios/fluxcd"
)

// FuzzFluxGitRepository searches lag-only schedules (finite delays and holds,
// every event eventually delivered) for a GitRepository that does not converge
// or ends in the claimed state.
func FuzzFluxGitRepository(f *testing.F) { fuzz.Fuzz(f, fluxcd.Scenario(fuzz.LagOnly)) }

// FuzzFluxGitRepositoryLoss searches lag and loss: windows may also drop
// events, which a real informer only meets when a watch breaks and it
// relists.
func FuzzFluxGitRepositoryLoss(f *testing.F) { fuzz.Fuzz(f, fluxcd.Scenario(fuzz.LagAndLoss)) }

// FuzzFluxGitRepositoryAnchoredLoss searches the same actions with each step
// anchored to the Nth MODIFIED event source-controller was sent, from seeds
// derived from a run without lag.
func FuzzFluxGitRepositoryAnchoredLoss(f *testing.F) {
	fuzz.Fuzz(f, fluxcd.Scenario(fuzz.AnchoredLoss))
}

// FuzzFluxGitRepositoryRealistic searches faults a real cluster produces
// (ordinary latency, lag, broken watches, relists after 410 Gone, source-controller restarts
// right after or before the answer to a write, reconnecting to lagging
// apiservers) for a GitRepository that does not converge or ends in the
// claimed state.
func FuzzFluxGitRepositoryRealistic(f *testing.F) {
	fuzz.Fuzz(f, fluxcd.Scenario(fuzz.RealisticLatency))
}

// TestCorpusMeaning pins what each committed corpus entry decodes to: the
// codec may grow new spaces, never change an old one's meaning.
func TestCorpusMeaning(t *testing.T) {
	// Printed by the code at 4a7839b, before the Realistic space existed.
	for entry, want := range map[string]string{
		"c461464ca704b279": "edit=0; t+0.00s–1.27s drop MODIFIED+DELETED+BOOKMARK gitrepositories for source-controller",
		"f377d96598a14f9d": "edit=1; t+0.50s–0.91s drop gitrepositories for source-controller",
	} {
		b, err := fuzz.ReadCorpusEntry("testdata/fuzz/FuzzFluxGitRepositoryLoss/" + entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := fluxcd.Scenario(fuzz.LagAndLoss).Decode(b).String(); got != want {
			t.Errorf("%s: %q decodes to %q; it meant %q", entry, b, got, want)
		}
	}
}
