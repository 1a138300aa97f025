package fuzz

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// campaignEnv names the directory of one go test -fuzz campaign, which its
// coordinator creates and its workers inherit: the workers' stats, the
// harness errors they skipped, why a worker could not start, and the
// reference seeds. A campaign's files never mix with another's.
const campaignEnv = "STALEFUZZ_CAMPAIGN"

// campaignDir is this campaign's directory, or the findings directory
// outside a campaign (a regression run).
func campaignDir() string {
	if d := os.Getenv(campaignEnv); d != "" {
		return d
	}
	return findingsDir()
}

// coordinate is the coordinator's side of a campaign: it gives the campaign
// a directory of its own (unless STALEFUZZ_CAMPAIGN names one), then runs
// prepare (the seeds) and fuzz (f.Fuzz), ending the campaign cleanly at
// -fuzztime, and afterwards prints the one execution count of the campaign
// and why any worker could not start.
func coordinate(target, scenario string, prepare, fuzz func()) {
	dir := os.Getenv(campaignEnv)
	owned := false
	if dir == "" {
		if err := os.MkdirAll(findingsDir(), 0o700); err == nil {
			dir, err = os.MkdirTemp(findingsDir(), scenario+"-campaign-")
			owned = err == nil
		}
		if owned {
			_ = os.Setenv(campaignEnv, dir) // the workers inherit it
			defer os.Unsetenv(campaignEnv)
		}
	}
	began := time.Now()
	prepare()
	stop := endAtFuzztime()
	fuzz()
	stop()
	if dir == "" {
		return
	}
	summarize(os.Stderr, target, scenario, dir, time.Since(began))
	if owned && !keep(dir) {
		_ = os.RemoveAll(dir)
	}
}

// endAtFuzztime ends a campaign whose -fuzztime is a duration the way an
// interrupt ends it, which go test treats as a clean end. Go 1.26's own
// deadline can fail the target with "context deadline exceeded" when a
// worker is still executing as it passes (golang/go#75804, fixed in 1.27),
// and a campaign's end is never a failure: the coordinator sets -fuzztime
// to an execution count it will not reach and interrupts itself at the
// deadline instead. It returns a function that cancels that.
func endAtFuzztime() (cancel func()) {
	fl := flag.Lookup("test.fuzztime")
	if fl == nil {
		return func() {}
	}
	d, err := time.ParseDuration(fl.Value.String())
	if err != nil || d <= 0 {
		return func() {} // a count, or no limit: no deadline to race
	}
	if err := fl.Value.Set(strconv.Itoa(math.MaxInt) + "x"); err != nil {
		return func() {}
	}
	// While the campaign runs, an interrupt must never kill the process
	// (its default action) even in the instants before go test watches
	// for one or after it stopped.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	t := time.AfterFunc(d, func() {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Signal(os.Interrupt)
		}
	})
	return func() {
		t.Stop()
		signal.Stop(sigs)
		_ = fl.Value.Set(d.String())
	}
}

// keep reports whether a campaign directory holds what a person must read:
// a harness error, a worker that could not start, or the executions that
// had only known findings (the summary points to known.log).
func keep(dir string) bool {
	for _, name := range []string{harnessErrorsFile, workerErrorsFile, knownFile} {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Size() > 0 {
			return true
		}
	}
	return false
}

const (
	harnessErrorsFile = "harness-errors.log"
	workerErrorsFile  = "worker-errors.log"
)

// statsLine matches the executions line of a worker's stats file.
var statsLine = regexp.MustCompile(`: (\d+) executions \((\d+) harness errors\)`)

// Stats sums the workers' stats files in a campaign directory: every
// execution a worker ran (the corpus replay and minimization included,
// which go test's own "execs" leave out) and how many could not be judged.
func Stats(dir string) (executions, harnessErrors, workers int) {
	eachStats(dir, func(s string) {
		if m := statsLine.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			h, _ := strconv.Atoi(m[2])
			executions, harnessErrors, workers = executions+n, harnessErrors+h, workers+1
		}
	})
	return executions, harnessErrors, workers
}

// eachStats calls f with each worker's stats file in the campaign
// directory dir.
func eachStats(dir string, f func(string)) {
	files, _ := filepath.Glob(filepath.Join(dir, "stats-*.log"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f(string(b))
		}
	}
}

// summarize prints what the campaign's workers did: the execution count,
// the harness errors, and why a worker could not start (go test shows that
// only as "fuzzing process terminated without fuzzing: EOF": a worker's
// output goes nowhere).
func summarize(w io.Writer, target, scenario, dir string, took time.Duration) {
	if b, err := os.ReadFile(filepath.Join(dir, workerErrorsFile)); err == nil && len(b) > 0 {
		fmt.Fprintf(w, "stalefuzz: %s: a fuzz worker could not start (harness error, not a finding):\n", target)
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			fmt.Fprintf(w, "  %s\n", sc.Text())
		}
	}
	n, h, workers := Stats(dir)
	if workers == 0 {
		return
	}
	fmt.Fprintf(w, "stalefuzz: %s: %d executions by %d workers in %.0fs (%.1f a minute), the corpus replay and minimization included", scenario, n, workers, took.Seconds(), float64(n)/took.Minutes())
	if h > 0 {
		fmt.Fprintf(w, "; %d could not be judged (harness errors, never findings): %s", h, filepath.Join(dir, harnessErrorsFile))
	}
	fmt.Fprintln(w)
	if k, byWhy := KnownHits(dir); k > 0 {
		fmt.Fprintf(w, "stalefuzz: %s: %d executions had only known findings (not findings, the campaign went on past them; each listed in %s):", scenario, k, filepath.Join(dir, knownFile))
		writeKnown(w, k, byWhy)
		fmt.Fprintln(w)
		// Matched by message only: the kept inputs tell a look-alike
		// from the known cause.
		inputs := KnownInputs(dir)
		for _, why := range slices.Sorted(maps.Keys(inputs)) {
			fmt.Fprintf(w, "stalefuzz: %s: kept (input, trace and log, the first %d a worker ran into) of %q: %s\n", scenario, KnownKept, why, strings.Join(inputs[why], ", "))
		}
	}
	// Each worker's start, by part: where a campaign's first minute went.
	eachStats(dir, func(s string) {
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, ": ready to fuzz in ") {
				fmt.Fprintf(w, "stalefuzz: %s\n", line)
			}
		}
	})
}

// workerFailed records why this worker could not start, for the
// coordinator to print.
func workerFailed(err error) {
	appendLine(workerErrorsFile, fmt.Sprintf("worker %d: %v", os.Getpid(), err))
}
