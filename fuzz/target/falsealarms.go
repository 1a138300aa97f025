package target

import (
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
// build, then the figure every ten executions) goes to progress (nil:
// nowhere).
func MeasureFalseAlarms(ctx context.Context, path string, n int, progress io.Writer) (fuzz.FalseAlarms, error) {
	t, err := Load(path)
	if err != nil {
		return fuzz.FalseAlarms{}, err
	}
	if err := Prepare(ctx, t, progress); err != nil {
		return fuzz.FalseAlarms{}, err
	}
	s, err := t.Scenario()
	if err != nil {
		return fuzz.FalseAlarms{}, err
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		return fuzz.FalseAlarms{}, err
	}
	var report func(int, fuzz.FalseAlarms)
	if progress != nil {
		report = func(done int, f fuzz.FalseAlarms) {
			if done%10 == 0 || done == n {
				fmt.Fprintf(progress, "stalefuzz: %d/%d executions: %s\n", done, n, f)
			}
		}
	}
	f, err := env.MeasureFalseAlarms(ctx, n, 1, report)
	return f, errors.Join(err, env.Stop())
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
// figure, and fails on any false alarm or when fewer than three quarters of
// the executions could be judged.
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
	f, err := MeasureFalseAlarms(context.Background(), path, n, os.Stderr)
	if err != nil {
		tb.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	tb.Logf("false alarms of %s: %s", abs, f)
	if len(f.ByOracle) > 0 {
		tb.Errorf("false alarms: %s", f)
	}
	if f.Executions < n*3/4 {
		tb.Errorf("only %d of %d executions could be judged: %s", f.Executions, n, f)
	}
}
