package kcm_test

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
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

// TestCorpusMeaning pins what each committed corpus entry decodes to: the
// codec may grow new spaces, never change an old one's meaning.
func TestCorpusMeaning(t *testing.T) {
	for path, want := range map[string]string{
		"FuzzJobGateOff/b3b26b327dea938c": "finish=0; rest=0; t+0.00s–3.50s hold jobs after the first 2 for kube-controller-manager",
		"FuzzJobGateOn/b3b26b327dea938c":  "finish=0; rest=0; t+0.00s–3.50s hold jobs after the first 2 for kube-controller-manager",
	} {
		b, err := fuzz.ReadCorpusEntry("testdata/fuzz/" + path)
		if err != nil {
			t.Fatal(err)
		}
		if got := kcm.Scenario(kcm.Job, false).Decode(b).String(); got != want {
			t.Errorf("%s: %q decodes to %q; it meant %q", path, b, got, want)
		}
	}
}
