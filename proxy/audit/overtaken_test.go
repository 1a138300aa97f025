package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// argo-rollouts#4044's window: the controller's patch of a ReplicaSet is
// stored at rv 11 and answered slowly; meanwhile the ReplicaSet
// controller's status write (rv 12) reaches the controller's watch. The
// answer arrives older than what the client was shown, and, as the last
// write the object gets, is never followed by a newer version: a cache
// that took the answer in holds rv 11 to the end.
func TestOvertakenAnswer(t *testing.T) {
	slow := statusPatch("argo", 100, "", "11", map[string]string{"status.pauseConditions": "null"})
	slow.Latency, slow.Held, slow.FaultKind = 5*time.Millisecond, 300*time.Millisecond, trace.FaultSlow
	quick := statusPatch("argo", 600, "", "13", map[string]string{"status.phase": `"Healthy"`}) // answered at 601 ms
	tr := trace.Trace{
		Requests: []trace.Request{slow, quick},
		Events: []trace.Event{
			released("argo", "10", 50),
			released("argo", "12", 200), // another writer's rv 12, before the answer (405 ms)
			released("argo", "11", 210), // its own write's event: older than what it has
			released("kcm", "14", 700),  // another client's view is not argo's
		},
	}
	rep := audit.Of(tr)
	if len(rep.Overtaken) != 1 {
		t.Fatalf("want the slow answer overtaken, got %+v", rep.Overtaken)
	}
	o := rep.Overtaken[0]
	if o.RV != "11" || o.View != "12" || o.Held != 300*time.Millisecond || !o.Lasting() || !o.At.Equal(at(405)) {
		t.Errorf("overtaken answer: %+v (lasting %v)", o, o.Lasting())
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"answers older than what their client had already been shown (1; 1 never followed by a newer version of the object):",
		"t+0.355s argo patch status rollouts ns/r at controller.go:70 (*Reconciler).Reconcile: its answer, rv 11, arrived 0.305s after it was sent, held 0.300s by a slow-answer fault, when the client had been shown rv 12; it was never shown the object again",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	if !strings.Contains(string(rep.HTML()), `class="lasting"`) {
		t.Errorf("HTML lacks the lasting answer:\n%s", rep.HTML())
	}

	// A later event of the object heals the cache; a restart ends it.
	tr.Events = append(tr.Events, released("argo", "13", 650))
	if rep := audit.Of(tr); len(rep.Overtaken) != 1 || rep.Overtaken[0].Lasting() || !rep.Overtaken[0].Next.Equal(at(650)) {
		t.Errorf("with a later event: %+v", rep.Overtaken)
	}
	tr.Events = tr.Events[:len(tr.Events)-1]
	tr.Restarts = []trace.Restart{{Client: "argo", At: at(500)}}
	if rep := audit.Of(tr); len(rep.Overtaken) != 1 || rep.Overtaken[0].Lasting() || !rep.Overtaken[0].Restarted {
		t.Errorf("with a restart after it: %+v", rep.Overtaken)
	}

	// An answer that came before the newer event is not overtaken, nor is
	// one whose client was shown only a list at a higher resourceVersion
	// (the list says what its scope held then, not that the object changed).
	slow.Held = 0
	listed := trace.Request{Client: "argo", Verb: "list", Resource: "rollouts", Namespace: "ns", Start: at(60), Latency: time.Millisecond, Code: 200, ReturnedRV: "20"}
	if rep := audit.Of(trace.Trace{Requests: []trace.Request{listed, slow}, Events: tr.Events}); len(rep.Overtaken) != 0 {
		t.Errorf("a prompt answer after a list at rv 20: want none overtaken, got %+v", rep.Overtaken)
	}
	// Overtaken by the object's deletion (the patch removed its last
	// finalizer): gone, not listed.
	slow.Held = 300 * time.Millisecond
	gone := released("argo", "12", 200)
	gone.Type = "DELETED"
	if rep := audit.Of(trace.Trace{Requests: []trace.Request{slow}, Events: []trace.Event{released("argo", "10", 50), gone}}); len(rep.Overtaken) != 0 {
		t.Errorf("an answer overtaken by the object's deletion: want none, got %+v", rep.Overtaken)
	}
	// An earlier object of the same name deleted (before rv 10): not this one.
	earlier := released("argo", "5", 20)
	earlier.Type = "DELETED"
	if rep := audit.Of(trace.Trace{Requests: []trace.Request{slow}, Events: []trace.Event{earlier, released("argo", "10", 50), released("argo", "12", 200)}}); len(rep.Overtaken) != 1 {
		t.Errorf("an answer overtaken after an earlier namesake's deletion: want it listed, got %+v", rep.Overtaken)
	}
	var none strings.Builder
	if err := audit.Of(trace.Trace{}).WriteTable(&none); err != nil || !strings.Contains(none.String(), "no write's answer reached its client after a newer version") {
		t.Errorf("an empty trace's table: %v\n%s", err, none.String())
	}
}
