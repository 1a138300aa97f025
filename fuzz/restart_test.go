package fuzz

import (
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestNewestBefore: a restart after a write answered without a
// resourceVersion (a delete's Status) lists from what the proxy had seen
// before that write was sent: the newest answer or event before it, and
// nothing after.
func TestNewestBefore(t *testing.T) {
	t0 := time.Now()
	tr := trace.Trace{
		Requests: []trace.Request{
			{ReturnedRV: "10", Start: t0, Latency: time.Millisecond},
			{ReturnedRV: "", Start: t0.Add(5 * time.Millisecond)}, // the delete
			{ReturnedRV: "30", Start: t0.Add(6 * time.Millisecond)},
		},
		Events: []trace.Event{
			{ResourceVersion: "12", Arrived: t0.Add(2 * time.Millisecond)},
			{ResourceVersion: "31", Arrived: t0.Add(7 * time.Millisecond)},
		},
	}
	if got := newestBefore(tr, t0.Add(5*time.Millisecond)); got != "13" {
		t.Errorf("newestBefore = %q, want 13 (one above 12, the newest seen before the delete)", got)
	}
	if got := newestBefore(tr, t0); got != "" {
		t.Errorf("newestBefore with nothing before = %q, want empty", got)
	}
}
