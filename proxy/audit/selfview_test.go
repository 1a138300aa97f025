package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// A reconcile that starts from a cache older than the previous reconcile's
// own status write, and replaces what that write set: the stale self-view.
func TestSelfStale(t *testing.T) {
	tr := trace.Trace{
		Requests: []trace.Request{
			statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`, "status.observedGeneration": "1"}),
			func() trace.Request { // its locked conditions patch from the stale view: 409
				r := statusPatch("c", 110, "10", "", map[string]string{"status.conditions": `[]`})
				r.Code = 409
				return r
			}(),
			statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`, "status.observedGeneration": "1"}),
		},
		Events: []trace.Event{released("c", "10", 50)}, // the event of rv 11 never came before t+120ms
	}
	rep := audit.Of(tr)
	if len(rep.SelfStale) != 2 {
		t.Fatalf("want the 409 and the stored write, got %+v", rep.SelfStale)
	}
	locked, stored := rep.SelfStale[0], rep.SelfStale[1]
	if locked.Code != 409 || locked.Stored() || len(locked.Replaced) != 0 || locked.View != "10" || locked.Own != "11" {
		t.Errorf("the locked write: %+v", locked)
	}
	want := []audit.Replaced{{Path: "status.inventory", Value: `["b"]`, Own: `["a"]`, OwnRV: "11"}}
	if d := cmp.Diff(want, stored.Replaced); d != "" || stored.RV != "12" || stored.View != "10" || stored.Own != "11" {
		t.Errorf("the stored write %+v; replaced (-want +got):\n%s", stored, d)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Behind() != "1 (1 replaced own)" || rep.Rows[1].Behind() != "1 (0 replaced own)" {
		t.Errorf("rows: %+v", rep.Rows)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"1 (1 replaced own)",
		"(no precondition, stored at rv 12) sent from a view at rv 10",
		"(precondition rv 10, answered 409) sent from a view at rv 10",
		"(2: 1 stored, 1 replaced values of that own write)",
		`c patch status rollouts ns/r at controller.go:70 (*Reconciler).Reconcile (no precondition, stored at rv 12) sent from a view at rv 10, older than its own patch status at controller.go:70 (*Reconciler).Reconcile at rv 11`,
		`status.inventory=["b"] replaced its own ["a"] of rv 11`,
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	if !strings.Contains(string(rep.HTML()), `replaced its own [&#34;a&#34;] of rv 11`) {
		t.Errorf("HTML lacks the write:\n%s", rep.HTML())
	}
}

func TestSelfStaleRestored(t *testing.T) {
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		statusPatch("c", 100, "", "11", map[string]string{"status.phase": `"Running"`}),
		statusPatch("c", 120, "", "12", map[string]string{"status.phase": `"Pending"`}),
		statusPatch("c", 200, "", "13", map[string]string{"status.phase": `"Running"`}),
	}, Events: []trace.Event{released("c", "10", 50)}})
	if len(rep.SelfStale) == 0 || len(rep.SelfStale[0].Replaced) != 1 || !rep.SelfStale[0].Replaced[0].Restored {
		t.Fatalf("want the second write's replacement marked restored, got %+v", rep.SelfStale)
	}
}

// apply is a server-side apply of status.conditions by manager.
func apply(client, manager string, ms int, rv, conditions string) trace.Request {
	r := statusPatch(client, ms, "", rv, map[string]string{"status.conditions": conditions})
	r.Write.Patch, r.Write.Manager, r.Write.Force = "apply", manager, true
	return r
}

// TestSelfStaleApply: a server-side apply is behind its own field
// manager's applies, and replaces what that manager applied; the same
// client's other managers are other writers (TestNotSelfStale).
func TestSelfStaleApply(t *testing.T) {
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		apply("c", "readiness", 100, "11", `[{"type":"Ready","status":"True"}]`),
		apply("c", "trigger", 110, "12", `[{"type":"Issuing","status":"True"}]`),
		apply("c", "readiness", 120, "13", `[{"type":"Ready","status":"False"}]`),
	}, Events: []trace.Event{released("c", "10", 50)}})
	if len(rep.SelfStale) != 1 {
		t.Fatalf("want only the second readiness apply (the trigger's has no apply of its own before it), got %+v", rep.SelfStale)
	}
	s := rep.SelfStale[0]
	want := []audit.Replaced{{Path: "status.conditions", Value: `[{"type":"Ready","status":"False"}]`, Own: `[{"type":"Ready","status":"True"}]`, OwnRV: "11"}}
	if d := cmp.Diff(want, s.Replaced); d != "" || s.RV != "13" || s.Own != "11" || s.View != "10" {
		t.Errorf("the readiness apply %+v; replaced (-want +got), the trigger's apply between them passed over:\n%s", s, d)
	}
}

func TestNotSelfStale(t *testing.T) {
	restart := trace.Restart{Client: "c", At: at(110)}
	for name, tr := range map[string]trace.Trace{
		"its own write shown to it first": {
			Requests: []trace.Request{
				statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`}),
				statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`}),
			},
			Events: []trace.Event{released("c", "11", 110)},
		},
		"the two writes in flight together": {
			Requests: []trace.Request{
				func() trace.Request {
					r := statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`})
					r.Latency = 50 * time.Millisecond // answered at t+150ms
					return r
				}(),
				statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`}),
			},
			Events: []trace.Event{released("c", "10", 50)},
		},
		"a restarted instance": {
			Requests: []trace.Request{
				statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`}),
				statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`}),
			},
			Restarts: []trace.Restart{restart},
			Events:   []trace.Event{released("c", "10", 50)},
		},
		"an answer its writer never got": {
			Requests: []trace.Request{
				func() trace.Request {
					r := statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`})
					r.FaultKind = trace.FaultCut
					return r
				}(),
				statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`}),
			},
			Events: []trace.Event{released("c", "10", 50)},
		},
		"another field manager's apply": { // cert-manager's controllers, one process
			Requests: []trace.Request{
				apply("c", "trigger", 100, "11", `[{"type":"Issuing","status":"True"}]`),
				apply("c", "readiness", 120, "12", `[{"type":"Ready","status":"False"}]`),
			},
			Events: []trace.Event{released("c", "10", 50)},
		},
		"another client's write": {
			Requests: []trace.Request{
				statusPatch("d", 100, "", "11", map[string]string{"status.inventory": `["a"]`}),
				statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`}),
			},
			Events: []trace.Event{released("c", "10", 50)},
		},
		"locked on its own write's answer": { // kube-controller-manager's Job controller
			Requests: []trace.Request{
				statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`}),
				statusPatch("c", 120, "11", "12", map[string]string{"status.inventory": `["b"]`}),
			},
			Events: []trace.Event{released("c", "10", 50)},
		},
		"a resource its writer never reads": { // an event recorder's count patch
			Requests: []trace.Request{
				{Client: "c", Verb: "create", Resource: "events", Namespace: "ns", Name: "e", Start: at(100), Latency: time.Millisecond, Code: 201, ReturnedRV: "11", Write: &trace.Write{Set: map[string]string{"count": "1"}}},
				{Client: "c", Verb: "patch", Resource: "events", Namespace: "ns", Name: "e", Start: at(120), Latency: time.Millisecond, Code: 200, ReturnedRV: "12", Write: &trace.Write{Patch: "strategic-merge", Set: map[string]string{"count": "2"}}},
			},
		},
		"a dry run": {
			Requests: []trace.Request{
				statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`}),
				func() trace.Request {
					r := statusPatch("c", 120, "", "12", map[string]string{"status.inventory": `["b"]`})
					r.DryRun = true
					return r
				}(),
			},
			Events: []trace.Event{released("c", "10", 50)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if rep := audit.Of(tr); len(rep.SelfStale) != 0 {
				t.Fatalf("flagged: %v", rep.SelfStale)
			}
		})
	}
	// Another client's value between its own write and the stale one: the
	// write is behind its own, but what it replaced was the other's (an
	// overwrite, not a replaced own value).
	rep := audit.Of(trace.Trace{Requests: []trace.Request{
		statusPatch("c", 100, "", "11", map[string]string{"status.inventory": `["a"]`}),
		statusPatch("d", 105, "", "12", map[string]string{"status.inventory": `["d"]`}),
		statusPatch("c", 120, "", "13", map[string]string{"status.inventory": `["b"]`}),
	}, Events: []trace.Event{released("c", "10", 50)}})
	if len(rep.SelfStale) != 1 || len(rep.SelfStale[0].Replaced) != 0 {
		t.Fatalf("want one write behind its own, replacing none of its own values, got %+v", rep.SelfStale)
	}
}
