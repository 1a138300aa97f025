package fuzz

import (
	"flag"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A finding never overwrites another's files: the same input found again
// (or in another checkout's campaign of the same scenario) gets the next
// free name.
func TestFindingsNeverOverwrite(t *testing.T) {
	dir := t.TempDir()
	first, err := reserveFinding(dir, "s-0123456789ab")
	if err != nil || first != "s-0123456789ab" {
		t.Fatalf("first reservation: %q, %v", first, err)
	}
	// A picture left by an earlier finding named -2 (its trace gone).
	if err := os.WriteFile(filepath.Join(dir, "s-0123456789ab-2.html"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := reserveFinding(dir, "s-0123456789ab")
	if err != nil || second != "s-0123456789ab-3" {
		t.Fatalf("second reservation: got %q, %v; want s-0123456789ab-3 (the base and -2 are taken)", second, err)
	}
	entry, _, err := writeCorpusEntry(dir, second, []byte("x"))
	if err != nil || filepath.Base(entry) != "s-0123456789ab-3.input" {
		t.Fatalf("corpus entry of the second: %q, %v", entry, err)
	}
}

// The one execution count of a campaign is the workers' own.
func TestStatsSumsTheWorkers(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(campaignEnv, dir)
	writeStats("s", Readiness{ControlPlane: 4 * time.Second, References: 2 * time.Second}, 40, 1, 0, time.Minute, Phases{})
	if err := os.WriteFile(filepath.Join(dir, "stats-1.log"), []byte("s: worker 1: 44 executions (0 harness errors) in 60s of fuzzing: 44.0 executions/min\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, h, w := Stats(dir); n != 84 || h != 1 || w != 2 {
		t.Fatalf("Stats = %d executions, %d harness errors, %d workers; want 84, 1, 2", n, h, w)
	}
	var b strings.Builder
	summarize(&b, "FuzzS", "s", dir, 2*time.Minute)
	if !strings.Contains(b.String(), "s: 84 executions by 2 workers in 120s (42.0 a minute)") {
		t.Errorf("summary: %q", b.String())
	}
	if !strings.Contains(b.String(), "ready to fuzz in 6.0s (control plane, CRDs and proxy 4.0s, setup 0.0s, warm-up execution 0.0s, reference runs 2.0s)") {
		t.Errorf("summary does not say where the worker's start went: %q", b.String())
	}
}

// A campaign's -fuzztime ends it as an interrupt does, never by go test's
// own deadline (golang/go#75804): the coordinator takes the flag over.
func TestEndAtFuzztimeInterruptsInsteadOfTheDeadline(t *testing.T) {
	fl := flag.Lookup("test.fuzztime")
	old := fl.Value.String()
	if err := fl.Value.Set("300ms"); err != nil {
		t.Fatal(err)
	}
	defer fl.Value.Set(old)
	got := make(chan os.Signal, 1)
	signal.Notify(got, os.Interrupt)
	defer signal.Stop(got)
	cancel := endAtFuzztime()
	if v := fl.Value.String(); !strings.HasSuffix(v, "x") {
		t.Errorf("while fuzzing, -fuzztime = %s: want an execution count, so that go test sets no deadline", v)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no interrupt 5s after a -fuzztime of 300ms")
	}
	cancel()
	if v := fl.Value.String(); v != "300ms" {
		t.Errorf("after the campaign, -fuzztime = %s, want 300ms again", v)
	}
}

// The campaign scripts tell a finding from a harness failure from a clean
// end: go test's own deadline failure (context deadline exceeded, no report)
// made the main job print FINDING once.
func TestCampaignScriptsTellFindingsFromFailures(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		log    string
		status int
		want   string
	}{
		{"fuzz: elapsed: 180s, execs: 43 (0/sec)\n--- FAIL: FuzzFluxGitRepositoryRealistic (198.68s)\n    context deadline exceeded\nFAIL\n", 1, "harness"},
		{"--- FAIL: FuzzX (0.07s)\n    fuzzing process terminated without fuzzing: EOF\nFAIL\n", 1, "harness"},
		{"--- FAIL: FuzzX (9.1s)\n    stalefuzz finding in scenario x\n    keep it as a regression row: mkdir -p testdata/fuzz/FuzzX && cp a b\nFAIL\n", 1, "finding"},
		{"fuzz: elapsed: 180s, execs: 43 (0/sec)\nPASS\n", 0, "none"},
	} {
		log := filepath.Join(dir, "log")
		if err := os.WriteFile(log, []byte(tc.log), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", "-c", `source ../hack/lib.sh && outcome "$0" "$1"`, log, strconv.Itoa(tc.status)).CombinedOutput()
		if err != nil {
			t.Fatalf("outcome: %v: %s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("exit %d after %q: outcome %q, want %q", tc.status, tc.log, got, tc.want)
		}
	}
}

// A watch a fault ended and the re-watch after it are judged by their
// times, whatever order a poll reads them in: read in one poll, the
// re-watch first, the watch was down forever and the run never settled.
func TestWatchStatesOrderByTime(t *testing.T) {
	t0 := time.Now()
	for _, order := range []string{"broken event first", "re-watch first"} {
		w := watchStates{}
		if order == "re-watch first" {
			w.opened("c|rollouts", t0.Add(time.Millisecond), t0.Add(2*time.Millisecond))
			w.ended("c|rollouts", t0)
		} else {
			w.ended("c|rollouts", t0)
			w.opened("c|rollouts", t0.Add(time.Millisecond), t0.Add(2*time.Millisecond))
		}
		if n, resumed := w.down(); n != 0 || !resumed.Equal(t0.Add(2*time.Millisecond)) {
			t.Errorf("%s: %d watches down, resumed at %v; want none down, resumed at t0+2ms", order, n, resumed.Sub(t0))
		}
	}
	w := watchStates{}
	w.opened("c|rollouts", t0, t0) // the first watch, before the fault
	w.ended("c|rollouts", t0.Add(time.Millisecond))
	if n, _ := w.down(); n != 1 {
		t.Errorf("a watch ended after it was opened: %d down, want 1", n)
	}
}

// go test's progress lines show the workers' own count, minutes included.
func TestProgressShowsTheWorkersCount(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stats-1.log"), []byte("s: worker 1: 84 executions (0 harness errors) in 60s of fuzzing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `source ../hack/lib.sh && progress "$0"`, dir)
	cmd.Stdin = strings.NewReader("fuzz: elapsed: 3s, execs: 43 (14/sec), new interesting: 0 (total: 1)\nfuzz: elapsed: 1m3s, execs: 43 (0/sec), new interesting: 0 (total: 1)\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("progress: %v: %s", err, out)
	}
	want := "fuzz: elapsed: 3s, executions: 84, new interesting: 0 (total: 1)\nfuzz: elapsed: 1m3s, executions: 84, new interesting: 0 (total: 1)\n"
	if string(out) != want {
		t.Errorf("progress rewrote\n%s\nwant\n%s", out, want)
	}
}
