package fuzz

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// stormTrace is one object's successful updates by client c from mark on,
// one every 100 ms, each setting spec.x to the next of values; a 409 for
// each "409".
func stormTrace(mark time.Time, c string, values ...string) trace.Trace {
	var tr trace.Trace
	rv := 100
	for i, v := range values {
		r := trace.Request{Client: c, Verb: "update", Resource: "widgets", Namespace: "ns", Name: "w", Start: mark.Add(time.Duration(i) * 100 * time.Millisecond)}
		if v == "409" {
			r.Code = 409
		} else {
			rv++
			r.Code, r.ReturnedRV, r.Write = 200, strconv.Itoa(rv), &trace.Write{Set: map[string]string{"spec.x": v}}
		}
		tr.Requests = append(tr.Requests, r)
	}
	return tr
}

func TestStormJudgesOnlyWhatGetsNowhere(t *testing.T) {
	mark := time.Unix(1000, 0)
	lagOver := mark.Add(150 * time.Millisecond) // the first two writes are before it
	for _, c := range []struct {
		name   string
		values []string
		want   string // in the message; "" for no storm
	}{
		{"a field set back and forth", []string{"x", "y", "a", "b", "a", "b", "a"}, "spec.x was set back to a value it had held 3 times"},
		{"two returns are not yet a circle", []string{"x", "y", "a", "b", "a", "b"}, ""},
		{"a circle that ended on a new value", []string{"x", "y", "a", "b", "a", "b", "a", "c"}, ""},
		{"a circle that went on after a new value", []string{"x", "y", "a", "b", "a", "b", "a", "c", "a"}, "spec.x was set back to a value it had held 4 times"},
		{"a slow controller's progress", []string{"a", "b", "c", "d", "e", "f"}, ""},
		{"a second version walking the steps the first walked", []string{"x", "y", "4", "0", "1", "0", "1", "2", "3", "4"}, ""},
		{"409 after 409", []string{"a", "409", "409", "409", "409"}, "3 met 409 Conflict"},
		{"circles before the faults were over do not count", []string{"a", "b", "a", "b", "a", "c"}, ""},
		{"no write at all", nil, ""},
		{"retries mostly before the faults were over, 2 after", []string{"a", "409", "409", "409"}, ""},
	} {
		got := storm(stormTrace(mark, "ctl", c.values...), mark, lagOver, mark.Add(2*time.Second), 200*time.Millisecond)
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: want no storm, got %q", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: want a storm saying %q, got %q", c.name, c.want, got)
		case c.want != "" && !strings.Contains(got, "by ctl"):
			t.Errorf("%s: the storm should name its writer: %q", c.name, got)
		}
	}
	if got := storm(stormTrace(mark, "ctl", "a", "409", "409", "409", "409"), mark, time.Time{}, mark.Add(2*time.Second), 200*time.Millisecond); got != "" {
		t.Errorf("a run whose faults never ended is no storm: %q", got)
	}
	// The same 409s, with settling given up 300 ms after the faults, less
	// than a 1 s quiet period: they did not keep the run from settling (the
	// settle budget ran out first). A prometheus-operator campaign's no-lag
	// execution on a loaded machine: 28 unchanged writes in the 0.26 s
	// before the budget ran out, reported as a storm.
	if got := storm(stormTrace(mark, "ctl", "a", "409", "409", "409", "409"), mark, lagOver, mark.Add(450*time.Millisecond), time.Second); got != "" {
		t.Errorf("writes that got nowhere for less than the quiet period before the budget ran out are no storm: %q", got)
	}
	// Sparse retries, one every 100 ms for 250 ms, with settling given up
	// 2 s after the faults: without them the run would have settled, so
	// they are what kept it busy (FluxCD's requeue after a lost event).
	if got := storm(stormTrace(mark, "ctl", "a", "409", "409", "409", "409"), mark, lagOver, mark.Add(2*time.Second), time.Second); !strings.Contains(got, "3 met 409 Conflict") {
		t.Errorf("retries that kept the run from settling for the quiet period are a storm: %q", got)
	}
}

func TestRetryBackoffFollowsClientGosRateLimiter(t *testing.T) {
	for _, c := range []struct {
		failing map[string]int
		want    time.Duration
	}{
		{nil, 0},
		{map[string]int{"a": 0}, 0},
		{map[string]int{"a": 1}, 5 * time.Millisecond},
		{map[string]int{"a": 7, "b": 2}, 320 * time.Millisecond},
		{map[string]int{"a": 9}, 1280 * time.Millisecond},
		{map[string]int{"a": 10}, SettleBudget},
		{map[string]int{"a": 64}, SettleBudget},
	} {
		if got := retryBackoff(c.failing); got != c.want {
			t.Errorf("retryBackoff(%v) = %v, want %v", c.failing, got, c.want)
		}
	}
}

// A run that never settled is a storm only when its schedule has a fault
// to blame that acted: a no-fault schedule, or one whose fault did nothing
// (a relist rule that met no watch), that does not settle where the
// reference runs did met a slower machine, and stays a harness error.
func TestStormNeedsAFault(t *testing.T) {
	knobs := map[string]int{"action": 2}
	e := &Env{learnedRefs: map[string]*learned{fmt.Sprint(knobs): {settled: true}}}
	relist := []Step{{Client: "c", Action: proxy.Expire, Length: time.Second}}
	expired := trace.Trace{Requests: []trace.Request{{Client: "c", Verb: "watch", FaultKind: trace.FaultExpire}}}
	for _, c := range []struct {
		name  string
		steps []Step
		tr    trace.Trace
		want  bool
	}{
		{"no fault", nil, trace.Trace{}, false},
		{"a relist", relist, expired, true},
		{"a relist that met no watch", relist, trace.Trace{}, false},
	} {
		res := &Result{Schedule: Schedule{Knobs: knobs, Steps: c.steps}, Trace: c.tr, storm: "its controllers kept writing without progress"}
		if got := e.judgeStorm(context.Background(), res); got != c.want || (len(res.Violations) > 0) != c.want {
			t.Errorf("%s: judged a storm %v (violations %v), want %v", c.name, got, res.Violations, c.want)
		}
	}
}

// TestFaultsActed: a schedule acted when an event a rule decided was held
// back (or dropped), a request was faulted, or a controller restarted; a
// delay of 0 s that handed every event on at once, and events no rule
// decided however late, did not act, so a storm cannot be blamed on it.
func TestFaultsActed(t *testing.T) {
	at := time.Now()
	ev := func(rule int, fate trace.Fate, after time.Duration) trace.Event {
		return trace.Event{Rule: rule, Fate: fate, Arrived: at, Released: at.Add(after)}
	}
	for _, c := range []struct {
		name string
		res  Result
		want bool
	}{
		{"delay 0 s", Result{Trace: trace.Trace{Events: []trace.Event{ev(0, trace.Released, 20*time.Microsecond)}}}, false},
		{"late but no rule", Result{Trace: trace.Trace{Events: []trace.Event{ev(-1, trace.Released, time.Second)}}}, false},
		{"delayed 50 ms", Result{Trace: trace.Trace{Events: []trace.Event{ev(0, trace.Released, 50*time.Millisecond)}}}, true},
		{"dropped", Result{Trace: trace.Trace{Events: []trace.Event{ev(1, trace.Dropped, 0)}}}, true},
		{"a faulted request", Result{Trace: trace.Trace{Requests: []trace.Request{{FaultKind: trace.FaultExpire}}}}, true},
		{"a restart", Result{Restarts: []Restart{{}}}, true},
	} {
		if got := faultsActed(&c.res); got != c.want {
			t.Errorf("%s: faultsActed %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStormSeesAnObjectsProgression: a field that circles while other
// fields of its object walk on to values they never held is the object's
// progression (an Argo Rollouts canary's HPAReplicas at each step's
// surge), not a storm; a circle whose other fields change only their
// times, or their observedGeneration, still is one.
func TestStormSeesAnObjectsProgression(t *testing.T) {
	mark := time.Unix(1000, 0)
	lagOver := mark
	writes := func(sets ...map[string]string) trace.Trace {
		var tr trace.Trace
		for i, set := range sets {
			tr.Requests = append(tr.Requests, trace.Request{Client: "ctl", Verb: "patch", Resource: "rollouts", Subresource: "status", Namespace: "ns", Name: "canary",
				Start: mark.Add(time.Duration(i+1) * 100 * time.Millisecond), Code: 200, ReturnedRV: strconv.Itoa(100 + i), Write: &trace.Write{Set: set}})
		}
		return tr
	}
	cond := func(s int) string {
		return fmt.Sprintf(`[{"lastTransitionTime":"2026-11-29T07:02:%02dZ","status":"True","type":"Progressing"}]`, s)
	}
	for _, c := range []struct {
		name  string
		sets  []map[string]string
		storm bool
	}{
		{"a canary's steps, HPAReplicas back at each surge", []map[string]string{
			{"status.HPAReplicas": "3", "status.currentStepIndex": "0"},
			{"status.HPAReplicas": "4", "status.updatedReplicas": "1"},
			{"status.HPAReplicas": "3", "status.currentStepIndex": "1"},
			{"status.HPAReplicas": "4", "status.updatedReplicas": "2"},
			{"status.HPAReplicas": "3", "status.currentStepIndex": "2"},
			{"status.HPAReplicas": "4", "status.updatedReplicas": "3"},
			{"status.HPAReplicas": "3", "status.phase": `"Healthy"`},
		}, false},
		{"a circle whose conditions change only their times", []map[string]string{
			{"status.x": "a", "status.conditions": cond(1)},
			{"status.x": "b", "status.conditions": cond(2)},
			{"status.x": "a", "status.conditions": cond(3)},
			{"status.x": "b", "status.conditions": cond(4)},
			{"status.x": "a", "status.conditions": cond(5)},
		}, true},
		{"a circle following a circling spec's generation", []map[string]string{
			{"status.x": "a", "status.observedGeneration": "1"},
			{"status.x": "b", "status.observedGeneration": "2"},
			{"status.x": "a", "status.observedGeneration": "3"},
			{"status.x": "b", "status.observedGeneration": "4"},
			{"status.x": "a", "status.observedGeneration": "5"},
		}, true},
		{"progress before the last three returns does not excuse them", []map[string]string{
			{"status.x": "a", "status.step": "1"},
			{"status.x": "b", "status.step": "2"},
			{"status.x": "a"},
			{"status.x": "b"},
			{"status.x": "a"},
			{"status.x": "b"},
		}, true},
	} {
		got, ok := flapping(writes(c.sets...), mark, lagOver)
		if ok != c.storm {
			t.Errorf("%s: storm %v (%q), want %v", c.name, ok, got, c.storm)
		}
	}
}
