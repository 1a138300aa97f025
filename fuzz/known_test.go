package fuzz

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

var twoKeys = Known{Oracle: "count", Message: "live Secrets at once", Why: "finding 1"}

// An execution is a known finding's only when every violation it raised
// matches one: a new violation beside a known one is a finding, and so is a
// known message raised by another oracle.
func TestKnownOnly(t *testing.T) {
	reissue := Known{Oracle: "count", Message: "live CertificateRequests at once", Why: "finding 2"}
	s := Scenario{Known: []Known{twoKeys, reissue}}
	keys := Violation{Oracle: "count", Message: "Certificate ca had 2 live Secrets at once at t+0.1s"}
	keys2 := Violation{Oracle: "count", Message: "Certificate leaf had 2 live Secrets at once at t+0.2s"}
	requests := Violation{Oracle: "count", Message: "Certificate ca had 2 live CertificateRequests at once"}
	for _, c := range []struct {
		name string
		vs   []Violation
		want []Known
	}{
		{"no violation", nil, nil},
		{"one known", []Violation{keys}, []Known{twoKeys}},
		{"one known twice, then another", []Violation{keys, keys2, requests}, []Known{twoKeys, reissue}},
		{"a known and a new one", []Violation{keys, {Oracle: "crash", Message: "exit 2"}}, nil},
		{"a known message from another oracle", []Violation{{Oracle: "end-state", Message: keys.Message}}, nil},
	} {
		if got := s.knownOnly(c.vs, Schedule{}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: knownOnly = %v, want %v", c.name, got, c.want)
		}
	}
	if (Known{Oracle: "count"}).Matches(keys) {
		t.Error("a Known without a message matches every violation of its oracle")
	}
}

// A known finding is matched by its oracle, message, subject and the
// schedule's fault kinds: the same message on another object, or from a
// schedule without the fault the finding needs, is reported.
func TestKnownBySubjectFaultsAndResources(t *testing.T) {
	lost := Known{Oracle: "end-state", Message: "missing", Subject: "StatefulSet prometheus-prom", Faults: []string{"relist"}, Why: "finding 1"}
	v := Violation{Oracle: "end-state", Subject: "StatefulSet prometheus-prom", Message: "StatefulSet prometheus-prom: missing; both no-fault reference runs have it"}
	relist := Schedule{Steps: []Step{{Client: "op", Resource: "statefulsets", Types: []string{"DELETED"}, Action: proxy.Expire, Length: time.Second}}}
	restart := Schedule{Steps: []Step{{Client: "op", Action: proxy.Freeze, Length: time.Second}}}
	latency := Schedule{Steps: []Step{{Action: proxy.Delay, Delay: 30 * time.Millisecond, Length: time.Second}}}
	for _, c := range []struct {
		name  string
		k     Known
		v     Violation
		sched Schedule
		want  bool
	}{
		{"the finding", lost, v, relist, true},
		{"the relist beside latency", lost, v, Schedule{Steps: append(slices.Clone(latency.Steps), relist.Steps...)}, true},
		{"after a restart instead", lost, v, restart, false},
		{"with no fault", lost, v, latency, false},
		{"another object", lost, Violation{Oracle: v.Oracle, Subject: "StatefulSet alertmanager-am", Message: "StatefulSet alertmanager-am: missing"}, relist, false},
		{"any schedule when Faults is empty", Known{Oracle: "end-state", Message: "missing"}, v, restart, true},
		{"none: only with no fault", Known{Oracle: "end-state", Message: "missing", Faults: []string{"none"}}, v, latency, true},
		{"none, and a fault", Known{Oracle: "end-state", Message: "missing", Faults: []string{"none"}}, v, relist, false},
		{"on the resource of its fault", Known{Oracle: "end-state", Message: "missing", On: []string{"statefulsets"}}, v, relist, true},
		{"on another resource", Known{Oracle: "end-state", Message: "missing", On: []string{"services"}}, v, relist, false},
		{"on the resource of a held watch", Known{Oracle: "end-state", Message: "missing", On: []string{"services"}}, v, Schedule{Steps: []Step{{Client: "op", Resource: "services", Action: proxy.Hold, Length: time.Second}}}, true},
		{"on a resource, with only latency", Known{Oracle: "end-state", Message: "missing", On: []string{"statefulsets"}}, v, latency, false},
	} {
		if got := c.k.Match(c.v, c.sched); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
	for _, st := range []Step{relist.Steps[0], restart.Steps[0], latency.Steps[0], {Action: proxy.Cut}, {Action: proxy.Lose}, {Action: proxy.Reject}, {Action: proxy.Hold, Resource: "x"}} {
		if !slices.Contains(FaultKinds, st.Kind()) {
			t.Errorf("step %s: Kind %q is not one of FaultKinds", st, st.Kind())
		}
	}
}

// MeasureFalseAlarms counts an execution with only known findings apart
// from the false alarms, per finding, and says so.
func TestFalseAlarmsKnown(t *testing.T) {
	f := FalseAlarms{ByOracle: map[string]int{}, First: map[string]string{}}
	keys := []Violation{{Oracle: "count", Message: "ca had 2 live Secrets at once"}}
	reissue := Known{Oracle: "count", Message: "live CertificateRequests at once", Why: "finding 2"}
	f.add(1, Schedule{}, nil, &Result{Violations: keys}, []Known{twoKeys}, "", "")
	f.add(2, Schedule{}, nil, &Result{Violations: keys}, []Known{twoKeys, reissue}, "", "") // both: once an execution, under each finding
	f.add(3, Schedule{}, nil, &Result{}, nil, "", "")
	if f.Executions != 3 || len(f.ByOracle) != 0 || len(f.Alarms) != 0 || f.KnownExecutions != 2 || f.Known["finding 1"] != 2 || f.Known["finding 2"] != 1 {
		t.Fatalf("got %d judged, by oracle %v, %d alarms, %d known %v; want 3, none, none, 2 with finding 1 twice and finding 2 once", f.Executions, f.ByOracle, len(f.Alarms), f.KnownExecutions, f.Known)
	}
	want := "no false alarm; 2 executions with only known findings (not false alarms): finding 1 ×2; finding 2 ×1; (3 in all: an execution with more than one counts under each)"
	if s := f.String(); !strings.Contains(s, want) {
		t.Errorf("String() = %q, want %q", s, want)
	}
}

// A campaign's summary says how many executions had only known findings,
// and which, without counting them twice as executions.
func TestSummaryCountsKnownFindings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(campaignEnv, dir)
	writeStats("s", Readiness{}, 40, 1, 3, time.Minute, Phases{})
	logKnown(Schedule{}, []Known{twoKeys}, "")
	logKnown(Schedule{}, []Known{twoKeys}, "")
	logKnown(Schedule{}, []Known{{Why: "finding 2"}}, "")
	if n, h, w := Stats(dir); n != 40 || h != 1 || w != 1 {
		t.Fatalf("Stats = %d, %d, %d; want 40, 1, 1", n, h, w)
	}
	if n, by := KnownHits(dir); n != 3 || by["finding 1"] != 2 || by["finding 2"] != 1 {
		t.Fatalf("KnownHits = %d, %v; want 3, finding 1 ×2 and finding 2 ×1", n, by)
	}
	var b strings.Builder
	summarize(&b, "FuzzS", "s", dir, time.Minute)
	if want := "s: 3 executions had only known findings (not findings, the campaign went on past them; each listed in " + filepath.Join(dir, knownFile) + "): finding 1 ×2; finding 2 ×1;\n"; !strings.Contains(b.String(), want) {
		t.Errorf("summary %q lacks %q", b.String(), want)
	}
	// A fourth execution had both: 3 + 2 lines in known.log for 4
	// executions, and the summary says why they add up to more.
	writeStats("s", Readiness{}, 41, 1, 4, time.Minute, Phases{})
	logKnown(Schedule{}, []Known{twoKeys, {Why: "finding 2"}}, "")
	b.Reset()
	summarize(&b, "FuzzS", "s", dir, time.Minute)
	if want := "s: 4 executions had only known findings (not findings, the campaign went on past them; each listed in " + filepath.Join(dir, knownFile) + "): finding 1 ×3; finding 2 ×2; (5 in all: an execution with more than one counts under each)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("summary %q lacks %q", b.String(), want)
	}
	if _, err := os.Stat(filepath.Join(dir, knownFile)); err != nil {
		t.Error(err)
	}
	// The summary points to known.log: a campaign directory the
	// coordinator made is kept for it.
	if !keep(dir) {
		t.Error("a campaign directory with a known.log is removed at the campaign's end")
	}
}

// A campaign keeps the input and trace of the first KnownKept executions of
// each known finding a worker runs into, so that a person can tell a
// look-alike (another cause writing the same message) from the known cause;
// known.log and the summary name the inputs.
func TestKeepKnown(t *testing.T) {
	findings, camp := t.TempDir(), t.TempDir()
	t.Setenv("STALEFUZZ_FINDINGS", findings)
	t.Setenv(campaignEnv, camp)
	reissue := Known{Oracle: "count", Message: "live CertificateRequests at once", Why: "finding 2"}
	var kept knownKept
	var paths []string
	for i := range KnownKept + 1 {
		input := []byte{byte(i), 1, 2}
		res := &Result{Violations: []Violation{{Oracle: "count", Message: "ca had 2 live Secrets at once"}}}
		p := kept.keep(res, "s", input, []Known{twoKeys})
		logKnown(Schedule{}, []Known{twoKeys}, p)
		if i == KnownKept {
			if p != "" {
				t.Errorf("execution %d of one known finding kept (%s), want the first %d only", i+1, p, KnownKept)
			}
			break
		}
		if p == "" {
			t.Fatalf("execution %d of a known finding not kept", i+1)
		}
		got, err := ReadCorpusEntry(p)
		if err != nil || !reflect.DeepEqual(got, input) {
			t.Errorf("kept input %s = %v, %v; want %v", p, got, err, input)
		}
		if _, err := os.Stat(strings.TrimSuffix(p, ".input") + ".jsonl"); err != nil {
			t.Errorf("trace of kept execution %d: %v", i+1, err)
		}
		paths = append(paths, p)
	}
	// Another known finding in the same execution as an exhausted one is
	// still kept, once.
	p := kept.keep(&Result{}, "s", []byte("both"), []Known{twoKeys, reissue})
	if p == "" {
		t.Fatal("an execution with a known finding not yet kept was not kept")
	}
	if again := kept.keep(&Result{}, "s", []byte("both"), []Known{reissue}); again != "" {
		t.Errorf("an input run again kept twice: %s", again)
	}
	if _, err := os.Stat(strings.TrimSuffix(p, ".input") + ".log"); err != nil {
		t.Errorf("controllers' log of a kept execution: %v", err)
	}
	logKnown(Schedule{}, []Known{twoKeys, reissue}, p)
	got := KnownInputs(camp)
	want := map[string][]string{"finding 1": append(paths, p), "finding 2": {p}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("KnownInputs = %v, want %v", got, want)
	}
	writeStats("s", Readiness{}, 10, 0, KnownKept+2, time.Minute, Phases{})
	var b strings.Builder
	summarize(&b, "FuzzS", "s", camp, time.Minute)
	if want := `kept (input, trace and log, the first 3 a worker ran into) of "finding 2": ` + p; !strings.Contains(b.String(), want) {
		t.Errorf("summary %q lacks %q", b.String(), want)
	}
}

// TestLogFinding: a finding a worker logs (input, schedule, first
// violation, its newlines flattened) is read back by LoggedFindings from
// the campaign's directory, one per line.
func TestLogFinding(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(campaignEnv, dir)
	if got := LoggedFindings(dir); got != nil {
		t.Fatalf("no log: %v", got)
	}
	res := &Result{Violations: []Violation{{Oracle: "count", Message: "4 live Pods\nthe no-fault runs never had more than 3"}}}
	logFinding("/f/a.input", Schedule{Knobs: map[string]int{"k": 1}}, res)
	logFinding("/f/b.input", Schedule{}, &Result{})
	got := LoggedFindings(dir)
	if len(got) != 2 || got[0].Input != "/f/a.input" || got[0].Violation != "[count] 4 live Pods the no-fault runs never had more than 3" || !strings.Contains(got[0].Schedule, "k=1") || got[1].Input != "/f/b.input" {
		t.Errorf("logged findings %+v, want a.input's with its count violation on one line, then b.input's", got)
	}
}

// TestEndStateSubject: an end-state violation's subject is the object its
// message is about, so that a known finding's Subject matches it (an entry
// with subject "canary" matched no end-state violation before: their
// Subject was empty).
func TestEndStateSubject(t *testing.T) {
	for msg, want := range map[string]string{
		`ReplicaSet canary-66dccc9c6f: spec.replicas=2 (reference runs: 0); status.replicas=2 (reference runs: 0)`: "ReplicaSet canary-66dccc9c6f",
		`StatefulSet prometheus-prom: missing; both no-fault reference runs have it`:                               "StatefulSet prometheus-prom",
		`Pod raycluster-head-*#1: present; no no-fault reference run has it`:                                       "Pod raycluster-head-*#1",
	} {
		if got := endStateSubject(msg); got != want {
			t.Errorf("endStateSubject(%q) = %q, want %q", msg, got, want)
		}
		k := Known{Oracle: "end-state", Subject: want, Message: "reference run"}
		if !k.Matches(Violation{Oracle: "end-state", Subject: endStateSubject(msg), Message: msg}) {
			t.Errorf("a known entry with subject %q does not match %q", want, msg)
		}
	}
}
