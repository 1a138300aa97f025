package fuzz

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

var oracleT0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func oracleAt(ms int) time.Time { return oracleT0.Add(time.Duration(ms) * time.Millisecond) }

// planPatch is a successful blind merge patch of group/resource ns/name's
// status.plan.id by client, committed at rv.
func planPatch(client, group, resource, name string, ms int, rv, id string) trace.Request {
	v := `"` + id + `"`
	return trace.Request{
		Client: client, Verb: "patch", APIGroup: group, Resource: resource, Subresource: "status", Namespace: "ns", Name: name,
		Start: oracleAt(ms), Latency: time.Millisecond, Code: 200, ReturnedRV: rv,
		Fields: map[string]string{"status.plan.id": v},
		Write:  &trace.Write{Patch: "merge", Set: map[string]string{"status.plan.id": v}},
	}
}

// judge returns what the lost-update oracle and the audit each say of tr.
func judge(tr trace.Trace) ([]lost, []audit.Overwrite) {
	return lostUpdates(tr, "status.plan.id"), audit.Of(tr).Overwrites
}

// The lost-update oracle and the audit share one definition of what a
// client has seen (trace.Views): each case is judged the same by both.
func TestLostUpdateOracleAndAuditAgree(t *testing.T) {
	const g = "example.com"
	for _, tc := range []struct {
		name string
		tr   trace.Trace
		lost bool
	}{{
		name: "b never saw a's plan: lost",
		tr: trace.Trace{Requests: []trace.Request{
			planPatch("a", g, "rollouts", "r", 100, "11", "A"),
			planPatch("b", g, "rollouts", "r", 300, "12", "B"),
		}},
		lost: true,
	}, {
		name: "b relisted after a's plan: its write was not blind to it",
		tr: trace.Trace{Requests: []trace.Request{
			planPatch("a", g, "rollouts", "r", 100, "11", "A"),
			{Client: "b", Verb: "list", APIGroup: g, Resource: "rollouts", Namespace: "ns", Start: oracleAt(150), Latency: 10 * time.Millisecond, Code: 200, ReturnedRV: "11"},
			planPatch("b", g, "rollouts", "r", 300, "12", "B"),
		}},
	}, {
		name: "b read a's plan with a GET",
		tr: trace.Trace{Requests: []trace.Request{
			planPatch("a", g, "rollouts", "r", 100, "11", "A"),
			{Client: "b", Verb: "get", APIGroup: g, Resource: "rollouts", Namespace: "ns", Name: "r", Start: oracleAt(150), Latency: 10 * time.Millisecond, Code: 200, ReturnedRV: "11"},
			planPatch("b", g, "rollouts", "r", 300, "12", "B"),
		}},
	}, {
		name: "b saw a ConfigMap named r at a's rv, not the rollout: lost",
		tr: trace.Trace{
			Requests: []trace.Request{
				planPatch("a", g, "rollouts", "r", 100, "11", "A"),
				planPatch("b", g, "rollouts", "r", 300, "13", "B"),
			},
			Events: []trace.Event{{Client: "b", Resource: "configmaps", Type: "MODIFIED", Namespace: "ns", Name: "r", ResourceVersion: "12",
				Arrived: oracleAt(200), Fate: trace.Released, Released: oracleAt(200), Rule: -1}},
		},
		lost: true,
	}, {
		name: "two kinds named r, each written by one client: nothing replaced",
		tr: trace.Trace{Requests: []trace.Request{
			planPatch("a", g, "rollouts", "r", 100, "11", "A"),
			planPatch("b", "other.example.com", "rollouts", "r", 300, "12", "B"),
		}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l, o := judge(tc.tr)
			if got := len(l) > 0; got != tc.lost {
				t.Errorf("lost-update oracle: lost = %v, want %v: %+v", got, tc.lost, l)
			}
			if got := len(o) > 0; got != tc.lost {
				t.Errorf("audit: overwrote unseen = %v, want %v: %+v", got, tc.lost, o)
			}
		})
	}
}

// A finding with twenty verdicts of one oracle on one object reads as the
// first and a count; Err and the picture keep every one.
func TestReportGroupsRepeatedViolations(t *testing.T) {
	var tr trace.Trace
	for i := range 20 {
		tr.Requests = append(tr.Requests,
			planPatch("a", "example.com", "rollouts", "r", 10*i, strconv.Itoa(100+2*i), "A"+strconv.Itoa(i)),
			planPatch("b", "example.com", "rollouts", "r", 10*i+5, strconv.Itoa(101+2*i), "B"+strconv.Itoa(i)))
	}
	res := &Result{Scenario: "s", Trace: tr}
	for _, l := range lostUpdates(tr, "status.plan.id") {
		res.Violations = append(res.Violations, Violation{Oracle: "lost-update", Subject: l.obj.String(), Message: l.msg, At: l.at})
	}
	res.violate("mine", "one")
	res.violate("mine", "two")
	if len(res.Violations) < 22 {
		t.Fatalf("want at least 20 lost updates and 2 checks, got %d violations", len(res.Violations))
	}
	rep := res.Report()
	if n := strings.Count(rep, "violation [lost-update]"); n != 1 {
		t.Errorf("report shows %d lost-update violations, want the first only:\n%s", n, rep)
	}
	if want := fmt.Sprintf("... and %d more like it ([lost-update] on rollouts.example.com ns/r", len(res.Violations)-3); !strings.Contains(rep, want) {
		t.Errorf("report lacks %q:\n%s", want, rep)
	}
	if !strings.Contains(rep, "violation [mine]: one") || !strings.Contains(rep, "violation [mine]: two") {
		t.Errorf("a check's different verdicts without a subject must each show:\n%s", rep)
	}
	if n := strings.Count(res.Err().Error(), "[lost-update]"); n != len(res.Violations)-2 {
		t.Errorf("Err lists %d lost updates, want every one", n)
	}
}

// TestCheckThatCannotJudgeIsAHarnessError: a check that returns a
// *HarnessError (its workload fell behind, say) makes the execution a
// harness error, not a violation.
func TestCheckThatCannotJudgeIsAHarnessError(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	var calls atomic.Int32
	s := Scenario{Name: "checkharness", Start: noop, Drive: noop, Checks: []Check{
		{Name: "cannot-judge", Fn: func(context.Context, *Exec, trace.Trace) error {
			if calls.Add(1) == 1 {
				return nil // NewEnv's warm-up
			}
			return &HarnessError{Err: errors.New("the stand-in fell behind")}
		}},
	}}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{})
	if _, ok := errors.AsType[*HarnessError](err); !ok || !strings.Contains(err.Error(), "the stand-in fell behind") {
		t.Fatalf("a run whose check cannot judge: got %v, want the check's harness error", err)
	}
	if len(res.Violations) > 0 {
		t.Errorf("violations %v, want none", res.Violations)
	}
}

// TestLostUpdateNeedsAWriteThatSetsThePath: a status patch's answer shows the
// spec as it is, changed by someone else since the writer's last write;
// the status patch did not replace it (certmanager's false-alarm run: its
// Certificate's spec.dnsNames, edited by the workload, "replaced" by the
// controller's next status patch). A write that set the path is judged.
func TestLostUpdateNeedsAWriteThatSetsThePath(t *testing.T) {
	statusPatch := func(ms int, rv, dns string, set map[string]string) trace.Request {
		return trace.Request{Client: "cm", Verb: "patch", APIGroup: "cert-manager.io", Resource: "certificates", Subresource: "status", Namespace: "ns", Name: "leaf",
			Start: oracleAt(ms), Latency: time.Millisecond, Code: 200, ReturnedRV: rv,
			Fields: map[string]string{"spec.dnsNames": dns}, Write: &trace.Write{Patch: "merge", Set: set}}
	}
	tr := trace.Trace{Requests: []trace.Request{
		statusPatch(100, "11", `["a"]`, map[string]string{"status.conditions": "[]"}),
		statusPatch(200, "13", `["a","b"]`, map[string]string{"status.conditions": "[1]"}), // someone else's edit, at 12, unseen
	}}
	if got := lostUpdates(tr, "spec.dnsNames"); len(got) != 0 {
		t.Errorf("a status patch was judged the replacing write: %v", got)
	}
	// The same answer from a write that set the path is a lost update.
	tr.Requests[1].Subresource = ""
	tr.Requests[1].Write.Set = map[string]string{"spec.dnsNames": `["a","b"]`}
	if got := lostUpdates(tr, "spec.dnsNames"); len(got) != 1 {
		t.Errorf("a write that set the path from a view before the value it replaced: %d lost updates, want 1", len(got))
	}
}

// A value whose writer lost the answer to its write was stored all the
// same: a later write from a view before it replaces it, and the message
// says it was never acknowledged.
func TestLostUpdateOfAValueWhoseAnswerWasLost(t *testing.T) {
	patch := func(ms int, rv, plan string) trace.Request {
		return trace.Request{Client: "ctl", Verb: "patch", Resource: "rollouts", Subresource: "status", Namespace: "ns", Name: "r",
			Start: oracleAt(ms), Latency: time.Millisecond, Code: 200, ReturnedRV: rv,
			Fields: map[string]string{"status.plan": plan}, Write: &trace.Write{Patch: "merge", Set: map[string]string{"status.plan": plan}}}
	}
	tr := trace.Trace{Requests: []trace.Request{patch(100, "11", `"a"`), patch(200, "12", `"b"`), patch(300, "13", `"c"`)}}
	tr.Requests[1].FaultKind = trace.FaultLose
	got := lostUpdates(tr, "status.plan")
	if len(got) != 2 {
		t.Fatalf("blind patches from an empty view: %d lost updates, want 2: %v", len(got), got)
	}
	if !strings.Contains(got[1].msg, `status.plan="b", stored by ctl (its answer lose: never acknowledged) at resourceVersion 12`) {
		t.Errorf("message %q", got[1].msg)
	}
	if !strings.Contains(got[0].msg, `status.plan="a", acknowledged to ctl at resourceVersion 11`) {
		t.Errorf("message %q", got[0].msg)
	}
}
