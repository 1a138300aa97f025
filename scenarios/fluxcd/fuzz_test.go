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
