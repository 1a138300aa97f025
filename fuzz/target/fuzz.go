package target

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/longrun"
)

// Fuzz is the whole fuzz target for a target file:
//
//	func FuzzMine(f *testing.F) { target.Fuzz(f, "target.yaml") }
//
// It loads the file (refusing one with errors before anything starts),
// prepares it (builds its Go controllers once, in the coordinator and in
// every worker alike; a cached build costs nothing) and runs fuzz.Fuzz on
// its Scenario.
func Fuzz(f *testing.F, path string) {
	f.Helper()
	s, err := prepared(path)
	if err != nil {
		f.Fatal(err)
	}
	fuzz.Fuzz(f, s)
}

// prepared is the scenario of the target file at path, loaded (refused
// with its errors) and prepared (its Go controllers built, once).
func prepared(path string) (fuzz.Scenario, error) {
	t, err := Load(path)
	if err != nil {
		return fuzz.Scenario{}, err
	}
	if err := Prepare(context.Background(), t, os.Stderr); err != nil {
		return fuzz.Scenario{}, err
	}
	return t.Scenario()
}

// LongCampaign runs campaign c (package longrun) on the target file at
// path, as Fuzz runs go test -fuzz's: the file loaded and prepared, then
// the campaign on its scenario. A finding fails t with its message (the
// report, the files, the regression row), unless the campaign searches on
// (fuzz.SearchOnEnv), which lists every finding in the campaign
// directory's findings.log instead. Every target may run this way; one
// with a budget (Target.Budget) must.
func LongCampaign(t *testing.T, path string, c longrun.Campaign) {
	t.Helper()
	s, err := prepared(path)
	if err != nil {
		t.Fatal(err)
	}
	// An interrupt (stalefuzz fuzz's, when another process found something
	// or the user pressed ^C) ends the campaign cleanly: its Env stopped,
	// nothing left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := c.Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d executions (%d harness errors) in %v, %d inputs interesting", sum.Executions, sum.HarnessErrors, sum.Elapsed.Round(time.Second), sum.Interesting)
	if os.Getenv(fuzz.SearchOnEnv) != "1" && len(sum.Findings) > 0 {
		f := sum.Findings[0]
		t.Fatal(f.Message(c.Target, f.Input))
	}
}
