package target

import (
	"context"
	"errors"
	"fmt"
	"io"

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
