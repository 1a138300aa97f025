package fuzz

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// write is a successful update by client c at rv, setting set, sent at
// start (ms after the mark).
func write(c string, rv, start int, set map[string]string) trace.Request {
	return trace.Request{Client: c, Verb: "update", Resource: "widgets", Namespace: "ns", Name: "w", Code: 200,
		ReturnedRV: strconv.Itoa(rv), Start: time.Unix(1000, 0).Add(time.Duration(start) * time.Millisecond), Write: &trace.Write{Set: set}}
}

func TestAnyFieldMasksWhatControllersRewrite(t *testing.T) {
	obj := trace.Object{Resource: "widgets", Namespace: "ns", Name: "w"}
	// A reference run: the user creates spec.y=1 and later sets it to 2;
	// the controller rewrites status.n (0, then 1) and carries spec.y.
	ref := trace.Trace{Requests: []trace.Request{
		write("ctl", 11, 10, map[string]string{"spec.y": "1", "status.n": "0"}),
		write("ctl", 13, 30, map[string]string{"spec.y": "2", "status.n": "1"}),
	}}
	direct := []directWrite{
		{obj: obj, rv: 10, set: map[string]string{"spec.y": "1"}},
		{obj: obj, rv: 12, set: map[string]string{"spec.y": "2"}},
	}
	rewritten := map[string]bool{}
	rewrittenFields(ref, direct, rewritten)
	if !rewritten["/widgets status.n"] || rewritten["/widgets spec.y"] || len(rewritten) != 1 {
		t.Fatalf("rewritten: got %v, want only the controller's status.n", rewritten)
	}

	// A faulty run: the controller, its view at the create (rv 10 seen by
	// a GET), writes spec.y=1 over the user's 2 and a new status.n, then
	// puts 2 back from the same view.
	get := trace.Request{Client: "ctl", Verb: "get", Resource: "widgets", Namespace: "ns", Name: "w", Code: 200, ReturnedRV: "10", Start: time.Unix(1000, 0)}
	run := trace.Trace{Requests: []trace.Request{
		get,
		write("ctl", 13, 30, map[string]string{"spec.y": "1", "status.n": "5"}),
		write("ctl", 14, 40, map[string]string{"spec.y": "2", "status.n": "6"}),
	}}
	got := lostUpdatesAnyField(run, direct, rewritten)
	if len(got) != 1 || got[0].path != "spec.y" || !strings.Contains(got[0].msg, "spec.y=2, acknowledged to the workload at resourceVersion 12, was replaced by spec.y=1 from ctl") {
		t.Errorf("want only the user's spec.y lost (status.n is the controller's, and putting 2 back repairs the loss), got %+v", got)
	}
	// The same writes by a client that never reads widgets (as an event
	// recorder never reads events): blind by design, not a lost update.
	run.Requests = run.Requests[1:]
	if got := lostUpdatesAnyField(run, direct, rewritten); len(got) != 0 {
		t.Errorf("a client that never reads the resource: want no lost update, got %+v", got)
	}
}
