package target

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// TestCommittedInputsKeepTheirMeaning: the committed target files moved
// from realistic to realistic-latency, whose actions 6 and 7 are ordinary
// latency where realistic's were holds; every input committed beside them
// must decode in the new space to the schedule it decoded to in the old
// one, or its regression row would test something else.
func TestCommittedInputsKeepTheirMeaning(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*/target.yaml")
	more, _ := filepath.Glob("../../scenarios/kcm/targets/*.yaml")
	checked := 0
	for _, f := range append(files, more...) {
		tg, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if tg.Faults.Space != "realistic-latency" {
			continue
		}
		s := tg.codec()
		s.Space = fuzz.Realistic
		inputs, _ := filepath.Glob(filepath.Join(filepath.Dir(f), "testdata", "*.input"))
		for _, in := range inputs {
			b, err := fuzz.ReadCorpusEntry(in)
			if err != nil {
				t.Fatal(err)
			}
			latency := s
			latency.Space = fuzz.RealisticLatency
			if old, now := s.Decode(b), latency.Decode(b); !reflect.DeepEqual(old, now) {
				t.Errorf("%s: in realistic %s, in realistic-latency %s: re-encode it (Scenario.Encode of the old schedule)", in, old, now)
			}
			checked++
		}
	}
	// The check has teeth: an input with action 6 means a hold in one
	// space and latency in the other.
	s := fuzz.Scenario{Clients: []string{"c"}, Resources: []string{"configmaps"}, Bounds: realisticBounds, Space: fuzz.Realistic}
	latency := s
	latency.Space = fuzz.RealisticLatency
	if b := []byte{0, 0, 0, 255, 6 | 8<<3, 0}; reflect.DeepEqual(s.Decode(b), latency.Decode(b)) {
		t.Errorf("action 6 decodes to %s in both spaces", s.Decode(b))
	}
	if checked < 20 {
		t.Fatalf("checked %d committed inputs, want the 20 or more there are", checked)
	}
}
