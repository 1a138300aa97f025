package target

import (
	"context"
	"os"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// TB is what StartEnv needs of a test: *testing.T, *testing.F and
// ginkgo's GinkgoT() all have it.
type TB interface {
	Helper()
	Fatal(args ...any)
	Error(args ...any)
	Cleanup(func())
}

// StartEnv prepares t (its Go controllers built when they are not cached,
// saying so on stderr), starts an Env for its Scenario and stops it when
// the test ends. Any failure fails the test.
func StartEnv(tb TB, t *Target) *fuzz.Env {
	tb.Helper()
	if err := Prepare(context.Background(), t, os.Stderr); err != nil {
		tb.Fatal(err)
	}
	s, err := t.Scenario()
	if err != nil {
		tb.Fatal(err)
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return env
}

// LoadEnv loads the target file at path and starts an Env for it
// (StartEnv). Any failure fails the test.
func LoadEnv(tb TB, path string) (*Target, *fuzz.Env) {
	tb.Helper()
	t, err := Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return t, StartEnv(tb, t)
}

// Input reads the saved input at path (a finding's .input file, or an
// entry of testdata/fuzz: go test's corpus format) and returns the schedule
// t's scenario decodes from it: what a regression row runs.
func (t *Target) Input(path string) (fuzz.Schedule, error) {
	b, err := fuzz.ReadCorpusEntry(path)
	if err != nil {
		return fuzz.Schedule{}, err
	}
	s, err := t.Scenario()
	if err != nil {
		return fuzz.Schedule{}, err
	}
	return s.Decode(b), nil
}
