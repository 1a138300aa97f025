package fuzz

import (
	"slices"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestFeaturesSayHowLate: how late the lag made an event is coverage, by
// powers of two of milliseconds, so that ordinary latency at a new level
// is a new input to keep (the mutator climbs toward a race's latency).
func TestFeaturesSayHowLate(t *testing.T) {
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	late := func(d time.Duration) *Result {
		return &Result{Trace: trace.Trace{Events: []trace.Event{{Client: "c", Type: "MODIFIED", Arrived: at, Released: at.Add(d), Fate: trace.Released, Rule: 0}}}}
	}
	f70, f5 := Features(late(70*time.Millisecond), nil), Features(late(5*time.Millisecond), nil)
	if !slices.Contains(f70, "held|c|7") || !slices.Contains(f5, "held|c|3") || slices.Contains(f5, "held|c|7") {
		t.Errorf("70 ms: %v; 5 ms: %v; want held|c|7 and held|c|3", f70, f5)
	}
}
