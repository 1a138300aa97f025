package fuzz

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// TestFalseAlarmsAdd: an execution counts once per oracle however many
// violations of it it raised, the first message of each oracle is kept,
// and every execution with a violation is listed with all of its
// violations, which survive the JSON line `stalefuzz false-alarms` reads.
func TestFalseAlarmsAdd(t *testing.T) {
	f := FalseAlarms{ByOracle: map[string]int{}, First: map[string]string{}}
	sched := Schedule{Knobs: map[string]int{"k": 1}, Steps: []Step{{Client: "c", Action: proxy.Delay, Delay: 40 * time.Millisecond, Length: time.Second}}}
	two := []Violation{
		{Oracle: "count", Subject: "Secret of Certificate ca", Message: "ca had 2"},
		{Oracle: "count", Subject: "CertificateRequest of Certificate leaf", Message: "leaf had 3"},
	}
	f.add(1, sched, &Result{}, nil)
	f.add(2, sched, &Result{Settled: true, Violations: two}, nil)
	f.add(3, sched, &Result{Settled: true, Violations: []Violation{{Oracle: "crash", Message: "exit 2"}}}, nil)

	if f.Executions != 3 || !reflect.DeepEqual(f.ByOracle, map[string]int{"count": 1, "crash": 1}) {
		t.Errorf("after 3 executions: %d judged, by oracle %v; want 3, count 1 and crash 1", f.Executions, f.ByOracle)
	}
	if f.Unsettled != 1 || !strings.Contains(f.String(), "3 executions judged (0 harness errors, not counted; 1 never settled, so no end state judged)") {
		t.Errorf("1 of 3 executions unsettled: counted %d, figure %q", f.Unsettled, f)
	}
	// Why executions could not be judged is said with the count.
	h := f
	h.HarnessErrors, h.HarnessError = 2, "execution 4: schedule die=1: start controllers in ns: context deadline exceeded"
	if want := "(2 harness errors, not counted; the first: execution 4: schedule die=1: start controllers in ns: context deadline exceeded; 1 never settled"; !strings.Contains(h.String(), want) {
		t.Errorf("figure %q lacks %q", h, want)
	}
	if want := "schedule " + sched.String() + ": ca had 2"; f.First["count"] != want {
		t.Errorf("first count message %q, want %q", f.First["count"], want)
	}
	want := []Alarm{{Execution: 2, Schedule: sched.String(), Violations: two}, {Execution: 3, Schedule: sched.String(), Violations: []Violation{{Oracle: "crash", Message: "exit 2"}}}}
	if !reflect.DeepEqual(f.Alarms, want) {
		t.Errorf("alarms %+v, want %+v", f.Alarms, want)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back FalseAlarms
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Alarms, want) {
		t.Errorf("alarms after a JSON round trip %+v, want %+v (%s)", back.Alarms, want, b)
	}
}
