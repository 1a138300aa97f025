package target

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
)

// FalseAlarmsOptions say what MeasureFalseAlarms runs.
type FalseAlarmsOptions struct {
	// Executions is how many executions to judge. Zero: 200.
	Executions int
	// Knobs keeps only the knob settings with these values, by the
	// target file's names ("write": "blind"). Zero: every setting.
	Knobs map[string]string
	// Progress gets the build's progress, the figure every ten
	// executions and each execution's violations with their triage, files
	// and replay command. Zero: nowhere.
	Progress io.Writer
	// Dir, when set, is where each execution with a violation that is not
	// a known finding is written (its trace, the controllers' log, its
	// picture and its input, named TARGET-alarm-STAMP-N, N its number from
	// 1: Alarm.Files), and each execution with a write behind its writer's
	// own that replaced that write's values for good (the stale-self-view
	// oracle's verdict, judged or not: TARGET-selfview-STAMP-N). Zero:
	// nothing is written.
	Dir string
	// Answer adds to each execution's ordinary latency one fault on the
	// answer to a controller's Nth write: "lose", "reset", "slow",
	// "reject" (429), "reject-500" or "reject-503" (fuzz.FalseAlarmsOptions
	// .Answer). The target file's space must be composed. Zero: ordinary
	// latency only.
	Answer string
}

// Answers are the names FalseAlarmsOptions.Answer takes.
var Answers = []string{"lose", "reset", "slow", "reject", "reject-500", "reject-503"}

// answer is the fault and status an Answer name stands for.
func answer(name string) (proxy.Action, int, error) {
	switch name {
	case "":
		return 0, 0, nil
	case "lose":
		return proxy.Lose, 0, nil
	case "reset":
		return proxy.Reset, 0, nil
	case "slow":
		return proxy.Slow, 0, nil
	case "reject", "reject-429":
		return proxy.Reject, 429, nil
	case "reject-500":
		return proxy.Reject, 500, nil
	case "reject-503":
		return proxy.Reject, 503, nil
	}
	return 0, 0, fmt.Errorf("answer fault %q: want one of %s", name, strings.Join(Answers, ", "))
}

// MeasureFalseAlarms loads and prepares the target file at path, starts its
// Env and runs fuzz.Env.MeasureFalseAlarms: executions under ordinary
// latency only (every watch delayed as much as the apiserver delayed one in
// the no-fault reference runs), each violation triaged as a race (a finding
// under ordinary latency) or the controller's nondeterminism (a false
// alarm).
func MeasureFalseAlarms(ctx context.Context, path string, o FalseAlarmsOptions) (fuzz.FalseAlarms, error) {
	act, code, err := answer(o.Answer)
	if err != nil {
		return fuzz.FalseAlarms{}, err
	}
	if act != 0 {
		t, err := Load(path)
		if err != nil {
			return fuzz.FalseAlarms{}, err
		}
		if t.Faults.Space != "composed" {
			return fuzz.FalseAlarms{}, fmt.Errorf("target %s (%s): false alarms under a %s answer need the composed space, which holds faults on answers; its space is %q: set faults.space: composed (in a copy beside it, so that its paths resolve)", t.Name, path, o.Answer, cmp.Or(t.Faults.Space, "realistic-latency"))
		}
	}
	t, env, err := prepareEnv(ctx, path, o.Progress)
	if err != nil {
		return fuzz.FalseAlarms{}, err
	}
	only, err := t.only(o.Knobs)
	if err != nil {
		return fuzz.FalseAlarms{}, errors.Join(err, env.Stop())
	}
	n := cmp.Or(o.Executions, 200)
	stamp := time.Now().Format("20060102-150405")
	progress := o.Progress
	var saveErr error
	report := func(done int, f fuzz.FalseAlarms, res *fuzz.Result, a *fuzz.Alarm) {
		if res != nil && o.Dir != "" && (a != nil || res.SelfViews.Lasting > 0) {
			what := "alarm"
			if a == nil {
				what = "selfview"
			}
			files, err := saveExecution(o.Dir, fmt.Sprintf("%s-%s-%s-%d", t.Name, what, stamp, done), res, env, done, o.Answer)
			saveErr = cmp.Or(saveErr, err)
			if a != nil {
				a.Files = files
			}
			if progress != nil && a == nil {
				fmt.Fprintf(progress, "stalefuzz: execution %d: a write behind its writer's own replaced that write's values for good (the stale-self-view oracle's case): trace %s\n", done, files.Trace)
			}
		}
		if progress != nil && a != nil {
			for _, v := range a.Violations {
				fmt.Fprintf(progress, "stalefuzz: execution %d: schedule %s: [%s] %s\n", done, a.Schedule, v.Oracle, v.Message)
			}
			fmt.Fprintf(progress, "stalefuzz: execution %d: %s\n", done, verdictLine(*a, o.Answer))
			writeAlarmFiles(progress, path, *a)
		}
		if progress != nil && (done%10 == 0 || done == n) {
			fmt.Fprintf(progress, "stalefuzz: %d/%d executions: %s\n", done, n, f)
		}
	}
	f, err := env.MeasureFalseAlarms(ctx, fuzz.FalseAlarmsOptions{Executions: n, Only: only, Progress: report, Answer: act, Code: code})
	return f, errors.Join(err, saveErr, env.Stop())
}

// only is the knob settings filter of knobs (by the file's value names);
// nil for none. An unknown knob or value is an error naming the choices.
func (t *Target) only(knobs map[string]string) (func(map[string]int) bool, error) {
	if len(knobs) == 0 {
		return nil, nil
	}
	want := map[string]int{}
	for name, value := range knobs {
		i := slices.IndexFunc(t.Knobs, func(k Knob) bool { return k.Name == name })
		if i < 0 {
			var names []string
			for _, k := range t.Knobs {
				names = append(names, k.Name)
			}
			return nil, fmt.Errorf("target %s: no knob %q (its knobs: %s)", t.Name, name, strings.Join(names, ", "))
		}
		v := slices.Index(t.Knobs[i].Values, value)
		if v < 0 {
			return nil, fmt.Errorf("target %s: knob %s has no value %q (its values: %s)", t.Name, name, value, strings.Join(t.Knobs[i].Values, ", "))
		}
		want[name] = v
	}
	return func(m map[string]int) bool {
		for k, v := range want {
			if m[k] != v {
				return false
			}
		}
		return true
	}, nil
}

// verdictLine says an alarm's triage in words; answer is the answer fault
// beside the ordinary latency, if any.
func verdictLine(a fuzz.Alarm, answer string) string {
	if a.Verdict == fuzz.Race {
		if answer != "" {
			return "a finding under ordinary latency and a " + answer + " answer (no no-fault run shows it; not a false alarm): " + a.Why
		}
		return "a finding under ordinary latency (a race, not a false alarm): " + a.Why
	}
	return "a false alarm (the controller's own nondeterminism: add an endState ignore path for it): " + a.Why
}

// writeAlarmFiles writes where an alarm's files are and the command that
// replays it.
func writeAlarmFiles(w io.Writer, target string, a fuzz.Alarm) {
	if a.Files.Trace != "" {
		fmt.Fprintf(w, "  trace: %s\n  picture: %s\n  controllers' log: %s\n", a.Files.Trace, a.Files.Picture, a.Files.Log)
	}
	switch {
	case a.Files.Input != "":
		fmt.Fprintf(w, "  replay it: stalefuzz replay %s %s --count 20\n", target, a.Files.Input)
	case a.Input == nil:
		fmt.Fprintf(w, "  replay it: stalefuzz replay %s --schedule %q --count 20 (the target's space has no input for it)\n", target, a.Schedule)
	}
}

// saveExecution writes execution i's trace, log, picture and input into
// dir, named name, and returns their paths.
func saveExecution(dir, name string, res *fuzz.Result, env *fuzz.Env, i int, answer string) (fuzz.AlarmFiles, error) {
	var out fuzz.AlarmFiles
	var err, e error
	out.Trace, err = res.WriteTrace(dir, name)
	out.Log, e = res.WriteLogs(dir, name)
	err = cmp.Or(err, e)
	out.Picture, e = res.WriteReport(dir, name)
	err = cmp.Or(err, e)
	if in, ok := env.Input(res.Schedule); ok {
		what := "ordinary latency only"
		if answer != "" {
			what = "ordinary latency and a " + answer + " answer, space composed"
		}
		out.Input, e = fuzz.WriteInput(dir, name, in, fmt.Sprintf("stalefuzz false-alarms, execution %d (%s)", i, what))
		err = cmp.Or(err, e)
	}
	return out, err
}

// FalseAlarmsTB is what CheckFalseAlarms needs of a test (*testing.T).
type FalseAlarmsTB interface {
	TB
	Skip(args ...any)
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// CheckFalseAlarms is a target package's false-alarm test: it measures the
// target file at path (MeasureFalseAlarms) over STALEFUZZ_FALSE_ALARMS
// executions, or n when that is unset (0: the test is skipped), logs the
// figure and each execution's violations with their triage, and fails on
// any false alarm, on any finding under ordinary latency that is not a
// known finding (the target's known list), and when fewer than three
// quarters of the executions could be judged. With
// STALEFUZZ_FALSE_ALARMS_DIR=DIR, the executions with a violation are
// written into DIR (their traces, logs, pictures and inputs).
func CheckFalseAlarms(tb FalseAlarmsTB, path string, n int) {
	tb.Helper()
	if v := os.Getenv("STALEFUZZ_FALSE_ALARMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			tb.Fatal(fmt.Errorf("STALEFUZZ_FALSE_ALARMS=%q: %w", v, err))
		}
	}
	if n <= 0 {
		tb.Skip("STALEFUZZ_FALSE_ALARMS=N runs it")
	}
	f, err := MeasureFalseAlarms(context.Background(), path, FalseAlarmsOptions{Executions: n, Progress: os.Stderr, Dir: os.Getenv("STALEFUZZ_FALSE_ALARMS_DIR")})
	if err != nil {
		tb.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	for _, a := range f.Alarms {
		for _, v := range a.Violations {
			tb.Logf("execution %d: schedule %s: [%s] %s", a.Execution, a.Schedule, v.Oracle, v.Message)
		}
		tb.Logf("execution %d: %s", a.Execution, verdictLine(a, ""))
	}
	tb.Logf("false alarms of %s: %s", abs, f)
	if len(f.ByOracle) > 0 {
		tb.Errorf("false alarms: %s", f)
	}
	if r := f.RaceExecutions(); r > 0 {
		tb.Errorf("%d executions with a finding under ordinary latency, not a known finding of %s (report it, then list it under oracles.known): %s", r, abs, f)
	}
	if f.Executions < n*3/4 {
		tb.Errorf("only %d of %d executions could be judged: %s", f.Executions, n, f)
	}
}

// prepareEnv loads and prepares the target file at path (its build's
// progress to progress) and starts its Env, which the caller stops.
func prepareEnv(ctx context.Context, path string, progress io.Writer) (*Target, *fuzz.Env, error) {
	t, err := Load(path)
	if err != nil {
		return nil, nil, err
	}
	if err := Prepare(ctx, t, progress); err != nil {
		return nil, nil, err
	}
	s, err := t.Scenario()
	if err != nil {
		return nil, nil, err
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		return nil, nil, err
	}
	return t, env, nil
}
