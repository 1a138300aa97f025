package kcm_test

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/scenarios/kcm"
)

// TestSeedsRoundTrip: every seed survives encoding, so the campaign starts
// from the schedules written here.
func TestSeedsRoundTrip(t *testing.T) {
	for _, c := range kcm.Controllers {
		s := kcm.Scenario(c, false)
		for _, seed := range s.Seeds {
			if got := s.Decode(s.Encode(seed)).String(); got != seed.String() {
				t.Errorf("%s: seed %q decodes to %q", c, seed, got)
			}
		}
	}
}
