package target

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// MeasureFalseAlarms loads and prepares the target file at path, starts its
// Env and runs fuzz.Env.MeasureFalseAlarms: n executions whose events are
// only delayed as much as the apiserver delayed them in the no-fault
// reference runs, so that every violation is a false alarm. Progress (the
// build, the figure every ten executions, and each execution's violations)
// goes to progress (nil: nowhere). When dir is not empty, each execution
// with a violation is written there too, its trace as alarm-N.jsonl and the
// controllers' log as alarm-N.log (N its number, from 1), for telling an
// oracle's error from a bug the latency brought out.
func MeasureFalseAlarms(ctx context.Context, path string, n int, progress io.Writer, dir string) (fuzz.FalseAlarms, error) {
	_, env, err := prepareEnv(ctx, path, progress)
	if err != nil {
		return fuzz.FalseAlarms{}, err
	}
	var saveErr error
	report := func(done int, f fuzz.FalseAlarms, res *fuzz.Result) {
		if res != nil && len(res.Violations) > 0 {
			if progress != nil {
				for _, v := range res.Violations {
					fmt.Fprintf(progress, "stalefuzz: execution %d: schedule %s: [%s] %s\n", done, res.Schedule, v.Oracle, v.Message)
				}
			}
			if dir != "" {
				name := fmt.Sprintf("alarm-%d", done)
				_, err := res.WriteTrace(dir, name)
				if err == nil {
					_, err = res.WriteLogs(dir, name)
				}
				saveErr = cmp.Or(saveErr, err)
			}
		}
		if progress != nil && (done%10 == 0 || done == n) {
			fmt.Fprintf(progress, "stalefuzz: %d/%d executions: %s\n", done, n, f)
		}
	}
	f, err := env.MeasureFalseAlarms(ctx, n, 1, report)
	return f, errors.Join(err, saveErr, env.Stop())
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
// figure and each execution's violations, and fails on any false alarm or
// when fewer than three quarters of the executions could be judged. With
// STALEFUZZ_FALSE_ALARMS_DIR=DIR, the executions with a violation are
// written into DIR (their traces and logs).
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
	f, err := MeasureFalseAlarms(context.Background(), path, n, os.Stderr, os.Getenv("STALEFUZZ_FALSE_ALARMS_DIR"))
	if err != nil {
		tb.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	for _, a := range f.Alarms {
		for _, v := range a.Violations {
			tb.Logf("execution %d: schedule %s: [%s] %s", a.Execution, a.Schedule, v.Oracle, v.Message)
		}
	}
	tb.Logf("false alarms of %s: %s", abs, f)
	if len(f.ByOracle) > 0 {
		tb.Errorf("false alarms: %s", f)
	}
	if f.Executions < n*3/4 {
		tb.Errorf("only %d of %d executions could be judged: %s", f.Executions, n, f)
	}
}
