package pymirror_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
)

// FuzzPyMirror searches faults a real cluster produces for the Python
// controller, as `stalefuzz fuzz target.yaml` does.
func FuzzPyMirror(f *testing.F) { target.Fuzz(f, "target.yaml") }

// knob values of target.yaml.
const (
	optimistic, blind = 0, 1
	edit100ms         = 0
)

// TestTargetFile runs the target file's controller against the real
// apiserver: with no fault, neither write mode loses anything; with its
// ConfigMap events delivered 300 ms late, or restarted onto an apiserver
// 300 ms behind, the blind mode overwrites the user's edit (the lost-update
// oracle names data.desired and the workload's value) and the optimistic
// one meets a real 409 instead.
func TestTargetFile(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed to run mirror.py: %v", err)
	}
	_, env := target.LoadEnv(t, "target.yaml")
	// Every event 300 ms late: the ConfigMap's creation reaches the
	// controller after the user's edit at t+0.1s, and the edit's own event
	// only after the controller wrote.
	late := []fuzz.Step{{Client: "mirror", Resource: "configmaps", Action: proxy.Delay, Delay: 300 * time.Millisecond, Start: 0, Length: 2 * time.Second}}
	// Restarted right after its first write, onto an apiserver that has not
	// seen it: its list is from before the user's edit at t+0.1s, whose
	// event comes 300 ms late.
	restart := []fuzz.Step{{Client: "mirror", Resource: "configmaps", Action: proxy.Freeze, Length: 2100 * time.Millisecond, Lag: 300 * time.Millisecond}}
	for _, c := range []struct {
		name  string
		mode  int
		steps []fuzz.Step
		lost  bool
		// conflict: the controller's stale write met a real 409 Conflict.
		conflict bool
	}{
		{"optimistic, no fault", optimistic, nil, false, false},
		{"blind, no fault", blind, nil, false, false},
		{"optimistic, events 300ms late", optimistic, late, false, true},
		{"blind, events 300ms late", blind, late, true, false},
		{"optimistic, restarted onto an apiserver 300ms behind", optimistic, restart, false, true},
		{"blind, restarted onto an apiserver 300ms behind", blind, restart, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"mode": c.mode, "edit": edit100ms}, Steps: c.steps}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			// The user's edit is what is lost: the workload's value.
			var lost []string
			for _, v := range res.Violations {
				if strings.Contains(v.Message, `data.desired="2", acknowledged to the workload`) {
					lost = append(lost, v.Message)
				}
			}
			if got := len(lost) > 0; got != c.lost {
				var logs strings.Builder
				_ = res.Logs.WriteTo(&logs, res.Mark)
				t.Errorf("schedule %s: lost update of data.desired: got %v, want %v; violations: %v\n%s\ncontrollers' log:\n%s", sched, got, c.lost, res.Violations, res.Report(), logs.String())
			}
			conflicts := 0
			for _, r := range res.Trace.Requests {
				if r.Client == "mirror" && r.Code == 409 {
					conflicts++
				}
			}
			if got := conflicts > 0; got != c.conflict {
				t.Errorf("schedule %s: the controller met a 409 Conflict: got %v (%d), want %v", sched, got, conflicts, c.conflict)
			}
			for _, v := range res.Violations {
				if !strings.Contains(v.Message, "data.desired") {
					t.Errorf("schedule %s: unexpected violation: %s: %s", sched, v.Oracle, v.Message)
				}
			}
		})
	}
}

// TestCrash: a controller that exits on its own with a panic line is the
// crash oracle's finding, always on, naming the controller and giving its
// panic; a target file cannot turn the oracle off.
func TestCrash(t *testing.T) {
	data, err := os.ReadFile("testdata/crash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := target.Parse("crash.yaml", "testdata", append(data, []byte("oracles:\n  crash: false\n")...)); err == nil || !strings.Contains(err.Error(), "crash oracle cannot be turned off") {
		t.Errorf("crash: false: got %v, want it refused", err)
	}
	tg, err := target.Load("testdata/crash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Run(context.Background(), fuzz.Schedule{})
	if err := env.Stop(); err != nil {
		t.Error(err)
	}
	if err != nil {
		t.Fatalf("a crash is a finding, not a harness error: %v", err)
	}
	var msgs []string
	for _, v := range res.Violations {
		if v.Oracle == "crash" && v.Subject == "controller mirror" {
			msgs = append(msgs, v.Message)
		}
	}
	joined := strings.Join(msgs, "\n")
	if !strings.Contains(joined, "exited on its own") || !strings.Contains(joined, "its panic: panic: desired value '2'") {
		t.Errorf("want the exit and the panic of controller mirror, got violations %v", res.Violations)
	}
}

// TestFalseAlarms: under ordinary latency only, the optimistic write mode
// raises no violation of any oracle the target file enables (lost update,
// end state, crash, storm), and the blind mode raises only races, never a
// false alarm: its designed bug (an update from its cache overwrites the
// user's edit) needs no fault, only a watch late enough. STALEFUZZ_FALSE_ALARMS=N
// runs N executions of each mode (make false-alarms-targets: 200) instead
// of 4, and prints the figures.
func TestFalseAlarms(t *testing.T) {
	n := 4
	if v := os.Getenv("STALEFUZZ_FALSE_ALARMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("STALEFUZZ_FALSE_ALARMS=%q: %v", v, err)
		}
	}
	for _, mode := range []string{"optimistic", "blind"} {
		f, err := target.MeasureFalseAlarms(context.Background(), "target.yaml", target.FalseAlarmsOptions{
			Executions: n, Knobs: map[string]string{"mode": mode}, Progress: os.Stderr, Dir: os.Getenv("STALEFUZZ_FALSE_ALARMS_DIR"),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("false alarms of target.yaml, mode=%s: %s", mode, f)
		if len(f.ByOracle) > 0 {
			t.Errorf("mode=%s: false alarms: %s", mode, f)
		}
		if mode == "optimistic" && f.RaceExecutions() > 0 {
			t.Errorf("mode=optimistic: races under ordinary latency: %s", f)
		}
		for _, a := range f.Alarms {
			for _, v := range a.Violations {
				if a.Verdict != fuzz.Race || v.Oracle != "lost-update" || !strings.Contains(v.Message, "acknowledged to the workload") {
					t.Errorf("mode=%s: execution %d: %s [%s] %s, want only races losing the workload's edit", mode, a.Execution, a.Verdict, v.Oracle, v.Message)
				}
			}
		}
		if f.Executions < n*3/4 {
			t.Errorf("mode=%s: only %d of %d executions could be judged: %s", mode, f.Executions, n, f)
		}
	}
}

// TestStorm: a controller that answers a 409 by sending the same stale copy
// again, forever, is the storm oracle's finding (on by default in a target
// file) once late events make its first write stale: the violation names
// the 409s and the client. The same controller without faults settles, and
// so does the control that waits for the next event instead.
func TestStorm(t *testing.T) {
	_, env := target.LoadEnv(t, "testdata/storm.yaml")
	const same, control = 0, 1 // knob retry
	late := []fuzz.Step{{Client: "mirror", Resource: "configmaps", Action: proxy.Delay, Delay: 300 * time.Millisecond, Start: 0, Length: 2 * time.Second}}
	for _, c := range []struct {
		name  string
		retry int
		steps []fuzz.Step
		storm bool
	}{
		{"retrying the same copy, events 300ms late", same, late, true},
		{"retrying the same copy, no fault", same, nil, false},
		{"waiting for the next event, events 300ms late", control, late, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"retry": c.retry}, Steps: c.steps}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			var storms []string
			for _, v := range res.Violations {
				if v.Oracle == "storm" {
					storms = append(storms, v.Message)
				} else {
					t.Errorf("schedule %s: unexpected violation: %s: %s", sched, v.Oracle, v.Message)
				}
			}
			if got := len(storms) > 0; got != c.storm {
				t.Fatalf("schedule %s: storm: got %v, want %v (settled %v): %v\n%s", sched, got, c.storm, res.Settled, storms, res.Report())
			}
			if c.storm {
				if msg := storms[0]; !strings.Contains(msg, "met 409 Conflict") || !strings.Contains(msg, "by mirror") || !strings.Contains(msg, "reference runs of these knob settings settled") {
					t.Errorf("schedule %s: the storm's message should count the 409s and name the client and the reference runs: %s", sched, msg)
				}
				t.Logf("schedule %s: %s", sched, storms[0])
			}
		})
	}
}

// TestAnyField: with lostUpdates ["*"] and no path named, the lost-update
// oracle still catches the blind mode overwriting the user's data.desired
// under late events, and says nothing of data.observed, which the
// controller rewrites in every no-fault run; the optimistic mode, which
// meets a 409 instead, and the blind mode without faults raise nothing.
func TestAnyField(t *testing.T) {
	_, env := target.LoadEnv(t, "testdata/anyfield.yaml")
	late := []fuzz.Step{{Client: "mirror", Resource: "configmaps", Action: proxy.Delay, Delay: 300 * time.Millisecond, Start: 0, Length: 2 * time.Second}}
	for _, c := range []struct {
		name  string
		mode  int
		steps []fuzz.Step
		lost  bool
	}{
		{"blind, events 300ms late", blind, late, true},
		{"optimistic, events 300ms late", optimistic, late, false},
		{"blind, no fault", blind, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"mode": c.mode, "edit": edit100ms}, Steps: c.steps}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
			if err != nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			lost := false
			for _, v := range res.Violations {
				switch {
				case v.Oracle == "lost-update" && strings.Contains(v.Message, `data.desired="2", acknowledged to the workload`):
					lost = true
				default:
					t.Errorf("schedule %s: unexpected violation: %s: %s", sched, v.Oracle, v.Message)
				}
			}
			if lost != c.lost {
				t.Errorf("schedule %s: the user's data.desired lost: got %v, want %v\n%s", sched, lost, c.lost, res.Report())
			}
		})
	}
}
