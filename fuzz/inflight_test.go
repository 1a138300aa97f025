package fuzz

import (
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// A write is in flight until its event has reached every client that
// watches its object; a client that does not watch it, or watches with a
// selector that never showed it, does not wait for it.
func TestInFlightUntilEveryWatcherWasSentTheWrite(t *testing.T) {
	obj := trace.Object{Group: "example.com", Resource: "widgets", Namespace: "ns", Name: "w"}
	f := newInFlight()
	f.request(&trace.Request{Client: "ctl", Verb: "watch", APIGroup: "example.com", Resource: "widgets", Namespace: "ns", Code: 200})
	f.request(&trace.Request{Client: "other", Verb: "watch", Resource: "configmaps", Namespace: "ns", Code: 200})
	f.request(&trace.Request{Client: "selective", Verb: "watch", APIGroup: "example.com", Resource: "widgets", Code: 200, Selected: true})
	if n := f.count(); n != 0 {
		t.Fatalf("nothing written: %d in flight", n)
	}
	f.wrote(obj, 10) // the workload's create
	if n := f.count(); n != 1 {
		t.Fatalf("the workload's create, not yet sent to ctl: %d in flight, want 1", n)
	}
	ev := trace.Event{Client: "ctl", Group: "example.com", Resource: "widgets", Type: "ADDED", Namespace: "ns", Name: "w", ResourceVersion: "10", Fate: trace.Released, Released: time.Now()}
	f.released(&ev)
	if n := f.count(); n != 0 {
		t.Fatalf("the create sent to ctl: %d in flight, want 0", n)
	}
	f.request(&trace.Request{Client: "ctl", Verb: "patch", APIGroup: "example.com", Resource: "widgets", Subresource: "status", Namespace: "ns", Name: "w", Code: 200, ReturnedRV: "11"})
	if n := f.count(); n != 1 {
		t.Fatalf("ctl's own status patch, its event not yet back: %d in flight, want 1", n)
	}
	noop := trace.Request{Client: "ctl", Verb: "patch", APIGroup: "example.com", Resource: "widgets", Namespace: "ns", Name: "w", Code: 200, ReturnedRV: "10"}
	f.request(&noop) // a no-op patch returns an old resourceVersion: no event comes
	ev.ResourceVersion, ev.Type = "11", "MODIFIED"
	f.released(&ev)
	if n := f.count(); n != 0 {
		t.Fatalf("everything sent: %d in flight, want 0", n)
	}
	// A selected watch that once showed the object waits for its writes.
	sel := ev
	sel.Client = "selective"
	f.released(&sel)
	f.wrote(obj, 12)
	if n := f.count(); n != 2 {
		t.Fatalf("a write neither ctl nor the selective watch (which showed the object) was sent: %d in flight, want 2", n)
	}
}
