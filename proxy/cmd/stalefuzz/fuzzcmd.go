package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/fuzz/target/driver"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
)

// module is stalefuzz's module path; driverPkg is the package whose test
// binary runs a target file (package fuzz/target/driver).
const (
	module    = "github.com/stalefuzz/stalefuzz"
	driverPkg = "./fuzz/target/driver"
	driverFn  = "FuzzTarget"
)

// Exit statuses of fuzz and replay.
const (
	exitClean   = 0 // no finding
	exitFinding = 1 // a finding (fuzz), or the input reproduced one (replay)
	exitHarness = 2 // a usage or harness error: nothing was judged
)

// exitError carries an exit status other than a usage error's.
type exitError struct {
	status int
	err    error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func newPrepareCmd() *cobra.Command {
	var controllersOnly bool
	cmd := &cobra.Command{
		Use:   "prepare TARGET.yaml",
		Short: "Check a target file and build what it needs (its Go controllers, the fuzz binary)",
		Args:  exactArgs("TARGET.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if controllersOnly {
				return prepareControllers(cmd.Context(), cmd.ErrOrStderr(), args[0])
			}
			_, _, err := prepare(cmd.Context(), cmd.ErrOrStderr(), args[0], "", true)
			return err
		},
	}
	cmd.Flags().BoolVar(&controllersOnly, "controllers-only", false, "build the target's Go controllers and download its CRDs' modules only, not the fuzz binary (what a Go test of the target needs; a CI cache step)")
	return cmd
}

// prepareControllers loads the target file, builds its Go controllers and
// downloads its CRDs' modules, and checks that it makes a scenario.
func prepareControllers(ctx context.Context, progress io.Writer, file string) error {
	t, err := target.Load(file)
	if err != nil {
		return exitError{exitHarness, err}
	}
	if err := target.Prepare(ctx, t, progress); err != nil {
		return exitError{exitHarness, err}
	}
	if _, err := t.Scenario(); err != nil {
		return exitError{exitHarness, err}
	}
	return nil
}

func newFuzzCmd() *cobra.Command {
	var (
		duration time.Duration
		workers  int
		findings string
		junit    string
		searchOn bool
		shard    string
		corpus   string
	)
	cmd := &cobra.Command{
		Use:   "fuzz TARGET.yaml",
		Short: "Run a fuzz campaign on the controllers a target file declares",
		Long: `fuzz checks the target file (an error names its line and field), builds
what it needs (its Go controllers and the coverage-instrumented fuzz binary,
cached: minutes the first time, seconds after), then searches fault
schedules for --time with --workers workers, each with its own control plane
and proxy, from an empty corpus. A finding prints its report, the paths of
its trace, picture, controllers' log and saved input, and the command that
replays it. By default the campaign ends at its first finding, as go test
-fuzz does; with --search-on it writes each finding, says when it was made,
and searches on until --time: the time to every finding, not only to the
first. It writes the first three executions of each finding (the same
oracle, object and message, with digits, generated name suffixes and lists
of alike names aside) and counts a later one apart as a repeat. A target
with a budget (executions longer than the 10 s go test -fuzz allows an
input) runs under stalefuzz's own driver instead (package fuzz/longrun):
the same seeds, oracles, findings, corpus format and --search-on, one
process with its own control plane per worker; --shard does not apply.
When go test -fuzz kills a worker (an input over its 10 s, on a loaded
machine), that input is kept as a harness error and the campaign goes on
for the time left. The exit status is 0 with no finding, 1 with a finding,
2 for a usage or harness error (nothing was judged).`,
		Args: exactArgs("TARGET.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workers < 1 {
				return usagef(cmd, "--workers %d: want at least 1", workers)
			}
			if duration <= 0 {
				return usagef(cmd, "--time %v: want a positive duration", duration)
			}
			if _, err := fuzz.ParseShard(shard); err != nil {
				return usagef(cmd, "--shard: %v", err)
			}
			return runCampaign(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), campaign{
				file: args[0], duration: duration, workers: workers, findings: findings, junit: junit, shard: shard, corpus: corpus, searchOn: searchOn,
			})
		},
	}
	cmd.Flags().DurationVar(&duration, "time", 5*time.Minute, "how long the campaign searches")
	cmd.Flags().IntVar(&workers, "workers", 2, "parallel workers, each with its own control plane")
	cmd.Flags().StringVar(&findings, "findings", "stalefuzz-findings", "directory for findings' traces, pictures, logs and inputs")
	cmd.Flags().StringVar(&junit, "junit", "", "write the result as JUnit XML to this file")
	cmd.Flags().StringVar(&corpus, "corpus", "", "a corpus directory (Go's format): the campaign starts from its entries and adds the inputs it found interesting; shards' directories merge by copying files")
	cmd.Flags().BoolVar(&searchOn, "search-on", false, "after a finding, write it and search on until --time (each finding reported with its time; repeats counted, not reported)")
	cmd.Flags().StringVar(&shard, "shard", "", "K/N: execute only the Kth of N disjoint shares of the schedules, seeds and mutations alike (K from 0, as a Job's JOB_COMPLETION_INDEX); findings of N shards merge by copying files")
	return cmd
}

func newReplayCmd() *cobra.Command {
	var (
		count    int
		findings string
		schedule string
	)
	cmd := &cobra.Command{
		Use:   "replay TARGET.yaml [INPUT]",
		Short: "Replay a saved input (a finding's, a false alarm's), or a schedule in words, against the target, --count times",
		Long: `replay runs the schedule a saved input (a go test fuzz corpus file, as a
finding or stalefuzz false-alarms keeps) decodes to, or the schedule in
words --schedule gives (what a report's "schedule:" line says; see
stalefuzz encode), --count times, and says in how many runs an oracle was
violated, and where the input came from (its .origin file beside it). The
exit status is 1 when it was in any run, 0 when in none, 2 for a usage or
harness error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 2 && schedule == "", len(args) == 1 && schedule != "":
				return nil
			case len(args) == 2:
				return usagef(cmd, "replay takes INPUT or --schedule, not both")
			}
			return usagef(cmd, "replay takes TARGET.yaml and INPUT (or --schedule WORDS); got %d arguments", len(args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 {
				return usagef(cmd, "--count %d: want at least 1", count)
			}
			if len(args) == 2 {
				b, err := os.ReadFile(args[1])
				if err != nil {
					return exitError{exitHarness, fmt.Errorf("unable to read input: %w", err)}
				}
				origin := cmp.Or(fuzz.InputOrigin(args[1]), "the file "+args[1]+" (nothing beside it says where it came from)")
				return replay(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], b, origin, count, findings)
			}
			t, err := target.Load(args[0])
			if err != nil {
				return exitError{exitHarness, err}
			}
			b, sched, err := t.EncodeText(schedule)
			if err != nil {
				return usagef(cmd, "--schedule: %v", err)
			}
			var corpus bytes.Buffer
			corpus.WriteString("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
			return replay(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], "schedule.input", corpus.Bytes(), "the schedule in words: "+sched.String(), count, findings)
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "how many times to run the input")
	cmd.Flags().StringVar(&findings, "findings", "stalefuzz-findings", "directory for the replays' traces, pictures and logs")
	cmd.Flags().StringVar(&schedule, "schedule", "", "a schedule in words to run instead of an input (\"write=blind; latency 30ms on every watch of every client\")")
	return cmd
}

func newEncodeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "encode TARGET.yaml WORDS",
		Short: "Write the input of a schedule in words, which stalefuzz replay and go test run",
		Long: `encode writes the input (a go test fuzz corpus file) of the target for a
schedule in words: what a finding's or a false alarm's "schedule:" line
says, parts separated by semicolons, such as

  write=blind; latency 30ms on every watch of every client
  t+0.00s–2.10s restart mirror right after its 1st write, reconnecting to an apiserver that has not seen that write, 0.30s behind
  t+0.50s–1.50s hold MODIFIED configmaps/settings for mirror

A knob's value is its index or the target file's name for it; a window left
out is the whole lag window; a duration the input cannot hold becomes the
nearest it can, which encode prints. It says what the input replays as, and
the command that replays it. Nothing is built or run.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef(cmd, "encode takes TARGET.yaml and the schedule in words (quoted); got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := target.Load(args[0])
			if err != nil {
				return exitError{exitHarness, err}
			}
			b, sched, err := t.EncodeText(args[1])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			path := out
			if path == "" {
				path = filepath.Join("stalefuzz-findings", fmt.Sprintf("%s-encoded-%x.input", t.Name, sha256.Sum256(b))[:len(t.Name)+21])
			}
			dir, name := filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), ".input")
			if path, err = fuzz.WriteInput(dir, name, b, "stalefuzz encode: "+sched.String()); err != nil {
				return exitError{exitHarness, err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\nit replays: %s\n  stalefuzz replay %s %s --count 20\n", path, sched, args[0], path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "the input file to write (NAME.input; its origin goes to NAME.origin). Default: stalefuzz-findings/TARGET-encoded-HASH.input")
	return cmd
}

// prepare loads and prepares the target file and builds the fuzz binary
// into dir (none when dir is empty). It returns the target file's absolute
// path and the binary's.
func prepare(ctx context.Context, progress io.Writer, file, dir string, fuzzing bool) (abs, bin string, err error) {
	if err := prepareControllers(ctx, progress, file); err != nil {
		return "", "", err
	}
	if abs, err = filepath.Abs(file); err != nil {
		return "", "", exitError{exitHarness, err}
	}
	src, err := source(ctx)
	if err != nil {
		return "", "", exitError{exitHarness, err}
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "stalefuzz-prepare-"); err != nil {
			return "", "", exitError{exitHarness, err}
		}
		defer os.RemoveAll(dir)
	}
	bin = filepath.Join(dir, "driver.test")
	args := []string{"test", "-c", "-o", bin, driverPkg}
	what := "the test binary that replays inputs"
	if fuzzing {
		// Coverage instrumentation: every package is compiled again.
		args = append(args, "-fuzz=^"+driverFn+"$")
		what = "the coverage-instrumented fuzz binary"
	}
	fmt.Fprintf(progress, "stalefuzz: compiling %s from %s (minutes the first time, seconds once Go's build cache has it)\n", what, src)
	start := time.Now()
	// The go command's own work directory goes inside dir, which is removed
	// however this ends: an interrupt kills go mid-build, and a killed go
	// leaves its $TMPDIR/go-build* behind (hundreds of entries).
	gotmp := filepath.Join(dir, "gotmp")
	if err := os.MkdirAll(gotmp, 0o700); err != nil {
		return "", "", exitError{exitHarness, err}
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = src
	build.Env = append(os.Environ(), "GOTMPDIR="+gotmp)
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", exitError{exitHarness, fmt.Errorf("unable to compile the fuzz binary in %s: %w\n%s", src, err, out)}
	}
	fmt.Fprintf(progress, "stalefuzz: built in %v; %s is ready\n", time.Since(start).Round(time.Second), file)
	return abs, bin, nil
}

// source is the directory of stalefuzz's own module, which the fuzz binary
// is built from: $STALEFUZZ_SRC; else the checkout the working directory is
// in; else this binary's released version in the module cache.
func source(ctx context.Context) (string, error) {
	if src := os.Getenv("STALEFUZZ_SRC"); src != "" {
		return src, nil
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module "+module+"\n") {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	version := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == module {
		version = bi.Main.Version
	}
	if strings.HasPrefix(version, "v") && !strings.Contains(version, "+") {
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
		cmd.Dir = os.TempDir()
		if out, err := cmd.Output(); err == nil {
			if m := regexp.MustCompile(`"Dir": "([^"]+)"`).FindSubmatch(out); m != nil {
				return string(m[1]), nil
			}
		}
	}
	return "", fmt.Errorf("unable to find stalefuzz's source (this binary is version %s, which the module proxy does not serve): set STALEFUZZ_SRC to a checkout of %s", version, module)
}

// campaign is what stalefuzz fuzz was asked.
type campaign struct {
	file                   string
	duration               time.Duration
	workers                int
	findings, junit, shard string
	corpus                 string
	// searchOn: the workers search on past a finding (fuzz.SearchOnEnv).
	searchOn bool
}

// fuzzUntil runs go test -fuzz (run, given the time left) until deadline,
// and returns its output and its last exit status. When it stopped because
// it killed a worker (an input over its 10 s, a machine too loaded to answer
// in time), it says so as a harness error, with the input keep kept (keep
// moves it out of the corpus go test would run first, and says where); the
// campaign then runs it again from the same corpus for the time left, up to
// maxRuns runs, unless interrupted or under 30 s are left: a worker killed
// on a loaded machine is a harness error, and neither a finding nor the end
// of the search (a campaign that stops at its first finding has none yet).
func fuzzUntil(ctx context.Context, stdout io.Writer, deadline time.Time, run func(fuzztime time.Duration) (string, int, error), keep func(input string) string) (out string, status int, err error) {
	for n := 1; ; n++ {
		o, st, err := run(time.Until(deadline).Round(time.Second))
		if err != nil {
			return out, st, err
		}
		out, status = out+o, st
		m := hungRE.FindStringSubmatch(o)
		if m == nil {
			return out, status, nil
		}
		fmt.Fprintf(stdout, "harness: go test -fuzz stopped: %s, at the input kept in %s: a harness error, not a finding", m[1], keep(m[2]))
		if interrupted.Load() || ctx.Err() != nil || time.Until(deadline) < 30*time.Second || n == maxRuns {
			fmt.Fprintln(stdout)
			return out, status, nil
		}
		fmt.Fprintf(stdout, "; fuzzing on for the %v left\n", time.Until(deadline).Round(time.Second))
	}
}

// maxRuns bounds how many times a campaign runs go test -fuzz again after
// it killed a worker.
const maxRuns = 5

// interrupted says the user interrupted this process (runBinary passed the
// signal on): a campaign is then not run again.
var interrupted atomic.Bool

// keepHung moves the input go test -fuzz wrote for a worker it killed
// (src, in the campaign's testdata, where the next run would execute it
// first as a seed) into the findings directory, with its origin, and
// returns its new path ("not kept: why" when it could not be).
func keepHung(src, findings string) string {
	b, err := fuzz.ReadCorpusEntry(src)
	if err == nil {
		var path string
		path, err = fuzz.WriteInput(findings, "hung-"+filepath.Base(src), b, "an input at which go test -fuzz killed the worker running it (hung or terminated unexpectedly): a harness error, not a finding")
		if err == nil {
			_ = os.Remove(src)
			return path
		}
	}
	_ = os.Remove(src)
	return "(not kept: " + err.Error() + ")"
}

var (
	// hungRE is go test -fuzz's report of a worker it killed, and the
	// input it wrote for it.
	hungRE     = regexp.MustCompile(`(fuzzing process hung or terminated unexpectedly[^\n]*)\n\s*Failing input written to (testdata/fuzz/\S+)`)
	keepRE     = regexp.MustCompile(`keep it as a regression row: .* cp (\S+) testdata/fuzz/`)
	progressRE = regexp.MustCompile(`^fuzz: elapsed: ([0-9hms.]+), execs: [0-9]+ \([0-9]+/sec\)(.*)$`)
	statsRE    = regexp.MustCompile(`: (\d+) executions`)
)

func runCampaign(ctx context.Context, stdout, stderr io.Writer, c campaign) error {
	work, rp, err := workDir("stalefuzz-fuzz-")
	if err != nil {
		return exitError{exitHarness, err}
	}
	defer rp.Stop()
	started := time.Now()
	tg, err := target.Load(c.file)
	if err != nil {
		return exitError{exitHarness, err}
	}
	long := tg.Long()
	if long > 0 && c.shard != "" {
		return exitError{exitHarness, fmt.Errorf("--shard %s: %s has a budget (%v an execution), and its campaign runs under stalefuzz's own driver, which does not shard: give each machine its own --corpus directory and merge them by copying files", c.shard, c.file, long)}
	}
	// A long target's campaign runs under stalefuzz's own driver, which
	// needs no coverage instrumentation (the trace is its signal).
	abs, bin, err := prepare(ctx, stderr, c.file, work, long == 0)
	if err != nil {
		return err
	}
	findings, err := filepath.Abs(c.findings)
	if err != nil {
		return exitError{exitHarness, err}
	}
	camp := filepath.Join(work, "campaign")
	if err := os.Mkdir(camp, 0o700); err != nil {
		return exitError{exitHarness, err}
	}
	from := "an empty corpus"
	if c.corpus != "" {
		n, err := copyFiles(c.corpus, filepath.Join(work, "testdata", "fuzz", driverFn))
		if err != nil {
			return exitError{exitHarness, fmt.Errorf("unable to read corpus %s: %w", c.corpus, err)}
		}
		from = fmt.Sprintf("the %d entries of %s", n, c.corpus)
	}
	fmt.Fprintf(stderr, "stalefuzz: fuzzing %s for %v with %d worker(s) from %s; findings go to %s\n", c.file, c.duration, c.workers, from, findings)
	var (
		out    string
		status int
	)
	if long > 0 {
		fmt.Fprintf(stderr, "stalefuzz: %s's executions may last %v (its budget), over the 10 s go test -fuzz allows an input: the campaign runs under stalefuzz's own driver (package fuzz/longrun), in Go's corpus format\n", c.file, long)
		out, status, err = runLong(ctx, rp, stdout, bin, work, camp, c, []string{"STALEFUZZ_TARGET=" + abs, "STALEFUZZ_FINDINGS=" + findings, "STALEFUZZ_CAMPAIGN=" + camp})
	} else {
		out, status, err = fuzzUntil(ctx, stdout, time.Now().Add(c.duration), func(fuzztime time.Duration) (string, int, error) {
			cmd := exec.CommandContext(ctx, bin, "-test.run=^$", "-test.fuzz=^"+driverFn+"$", "-test.fuzztime="+fuzztime.String(),
				"-test.fuzzminimizetime=10x", "-test.parallel="+strconv.Itoa(c.workers), "-test.fuzzcachedir="+filepath.Join(work, ".fuzzcache"))
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "STALEFUZZ_TARGET="+abs, "STALEFUZZ_FINDINGS="+findings, "STALEFUZZ_CAMPAIGN="+camp, "STALEFUZZ_SHARD="+c.shard)
			if c.searchOn {
				cmd.Env = append(cmd.Env, fuzz.SearchOnEnv+"=1")
			}
			return runBinary(rp, cmd, stdout, func(line string) string {
				if m := progressRE.FindStringSubmatch(line); m != nil {
					return fmt.Sprintf("fuzz: elapsed: %s, executions: %d%s", m[1], executions(camp), m[2])
				}
				return line
			})
		}, func(input string) string {
			kept := keepHung(filepath.Join(work, input), findings)
			return kept + " (replay it: stalefuzz replay " + c.file + " " + kept + ")"
		})
	}
	if err != nil {
		return exitError{exitHarness, err}
	}
	if c.corpus != "" {
		n, err := copyFiles(filepath.Join(work, ".fuzzcache", driverFn), c.corpus)
		if err != nil {
			return exitError{exitHarness, fmt.Errorf("unable to save the corpus in %s: %w", c.corpus, err)}
		}
		fmt.Fprintf(stdout, "figures: %d corpus entries saved in %s\n", n, c.corpus)
	}
	execs, elapsed := executions(camp), time.Since(started).Round(time.Second)
	fmt.Fprintf(stdout, "\nfigures: %d executions, %v wall clock in all (builds and control plane start included)\n", execs, elapsed)
	keepLogs(stdout, camp, findings, time.Now())
	known, _ := fuzz.KnownHits(camp)
	keptKnown(stdout, camp, c.file)
	if n := fuzz.Repeats(camp); n > 0 {
		fmt.Fprintf(stdout, "figures: %s repeated a finding this campaign had written (not reported again)\n", executionsWord(n))
	}
	var result error
	verdict := "none"
	switch m := keepRE.FindStringSubmatch(out); {
	case m != nil:
		verdict = "finding"
		fmt.Fprintf(stdout, "result: FINDING after %v (report above). Replay it 20 times:\n  stalefuzz replay %s %s --count 20\n", elapsed, c.file, m[1])
		reportUnreported(stdout, camp, c.file, elapsed, m[1])
		result = exitError{exitFinding, errors.New("a finding")}
	case c.searchOn && reportSearchedOn(stdout, camp, c.file, started):
		verdict = "finding"
		result = exitError{exitFinding, errors.New("a finding")}
	case reportUnreported(stdout, camp, c.file, elapsed, ""):
		verdict = "finding"
		result = exitError{exitFinding, errors.New("a finding")}
	case status != 0:
		verdict = "harness"
		fmt.Fprintf(stdout, "result: HARNESS FAILURE after %v, not a finding (exit %d): the campaign could not run\n", elapsed, status)
		result = exitError{exitHarness, fmt.Errorf("the campaign could not run (exit %d)", status)}
	default:
		if known > 0 {
			fmt.Fprintf(stdout, "result: no new finding in %v (%d executions, %d of them with only known findings)\n", c.duration, execs, known)
			break
		}
		fmt.Fprintf(stdout, "result: no finding in %v (%d executions)\n", c.duration, execs)
	}
	if c.junit != "" {
		if err := writeJUnit(c.junit, c.file, verdict, out, elapsed); err != nil {
			return exitError{exitHarness, err}
		}
	}
	return result
}

// runLong runs a long target's campaign (Target.Budget): c.workers
// processes of the test binary bin, each running TestLongCampaign (package
// fuzz/longrun's driver) with a control plane of its own, sharing the
// campaign directory camp and one corpus directory, work's .fuzzcache (so
// that --corpus saves it as it saves go test -fuzz's), and starting from
// work's testdata (where --corpus put its entries). Without --search-on, a
// finding in one process ends the others, cleanly, as go test -fuzz ends a
// campaign at its first. Each process runs its share of the seeds
// (STALEFUZZ_LONG_SHARE), and mutates from the whole corpus. It returns their output and the highest exit
// status.
func runLong(ctx context.Context, rp *reaper.Reaper, stdout io.Writer, bin, work, camp string, c campaign, env []string) (string, int, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type ran struct {
		out    string
		status int
		err    error
	}
	results := make(chan ran, c.workers)
	for i := 0; i < c.workers; i++ {
		cmd := exec.CommandContext(lctx, bin, "-test.run=^TestLongCampaign$", "-test.timeout=0", "-test.count=1")
		cmd.Dir = work
		cmd.Env = append(append(os.Environ(), env...), "STALEFUZZ_LONG_TIME="+c.duration.String(),
			"STALEFUZZ_LONG_CORPUS="+filepath.Join(work, ".fuzzcache", driverFn),
			fmt.Sprintf("STALEFUZZ_LONG_SHARE=%d/%d", i, c.workers)) // each runs its share of the seeds
		if c.searchOn {
			cmd.Env = append(cmd.Env, fuzz.SearchOnEnv+"=1")
		}
		go func() {
			out, st, err := runBinary(rp, cmd, stdout, func(line string) string {
				if m := progressRE.FindStringSubmatch(line); m != nil {
					return fmt.Sprintf("fuzz: elapsed: %s, executions: %d%s", m[1], executions(camp), m[2])
				}
				return line
			})
			if st != 0 && !c.searchOn {
				cancel() // a finding (or a failure): the others end cleanly
			}
			if err != nil && lctx.Err() != nil && ctx.Err() == nil {
				// Interrupted by this campaign at another's finding: a
				// clean end (Wait reports the context's error).
				err = nil
			}
			results <- ran{out, st, err}
		}()
	}
	var all strings.Builder
	status := 0
	var errs []error
	for i := 0; i < c.workers; i++ {
		r := <-results
		all.WriteString(r.out)
		status = max(status, r.status)
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	return all.String(), status, errors.Join(errs...)
}

// reportUnreported reports the findings the campaign's workers wrote
// (fuzz.LoggedFindings) but go test -fuzz did not report (all but the one
// whose input is reported, "" when none was), and says whether there was
// one. go test reports one failure per campaign (another worker's, met at
// the same time, goes unsaid), and none for an input that passed when run
// and failed when a worker ran it again before minimizing it for its
// coverage (internal/fuzz drops that failure). Each is a finding all the
// same, with its files in the findings directory.
func reportUnreported(stdout io.Writer, camp, file string, elapsed time.Duration, reported string) bool {
	n := 0
	for _, f := range fuzz.LoggedFindings(camp) {
		if f.Input == reported {
			continue
		}
		n++
		fmt.Fprintf(stdout, "result: FINDING after %v that go test -fuzz did not report (it reports one failure, and drops one an input meets only when a worker runs it again before minimizing it):\n  schedule: %s\n  violation: %s\n  replay it 20 times: stalefuzz replay %s %s --count 20\n", elapsed, f.Schedule, f.Violation, file, f.Input)
	}
	return n > 0
}

// reportSearchedOn reports every finding a searching-on campaign wrote
// (fuzz.LoggedFindings), in the order they were made, each with its time
// since the campaign began (started: builds and control planes included),
// and says whether there was one.
func reportSearchedOn(stdout io.Writer, camp, file string, started time.Time) bool {
	found := fuzz.LoggedFindings(camp)
	slices.SortStableFunc(found, func(a, b fuzz.LoggedFinding) int { return a.At.Compare(b.At) })
	for i, f := range found {
		at := "at an unknown time"
		if !f.At.IsZero() {
			at = "after " + f.At.Sub(started).Round(time.Second).String()
		}
		fmt.Fprintf(stdout, "result: FINDING %d of %d, %s (searching on):\n  schedule: %s\n  violation: %s\n  replay it 20 times: stalefuzz replay %s %s --count 20\n", i+1, len(found), at, f.Schedule, f.Violation, file, f.Input)
	}
	return len(found) > 0
}

// campaignLogs are the campaign directory's files a person reads after
// the campaign, which keepLogs copies out of it (it is removed), by what
// their lines are.
var campaignLogs = []struct{ file, what string }{
	{"harness-errors.log", "harness-errors"},
	{"worker-errors.log", "worker-errors"},
	{"known.log", "executions with only known findings"},                  // fuzz.KnownHits
	{"repeats.log", "executions that repeated a finding of the campaign"}, // fuzz.Repeats
}

// keepLogs copies the campaign directory camp's logs (campaignLogs) into
// the findings directory, named by the time now, and says where.
func keepLogs(stdout io.Writer, camp, findings string, now time.Time) {
	for _, l := range campaignLogs {
		if b, err := os.ReadFile(filepath.Join(camp, l.file)); err == nil && len(b) > 0 {
			kept := filepath.Join(findings, now.Format("20060102-150405")+"-"+l.file)
			if os.MkdirAll(findings, 0o700) == nil && os.WriteFile(kept, b, 0o600) == nil {
				fmt.Fprintf(stdout, "figures: %d lines of %s (not findings): %s\n", strings.Count(string(b), "\n"), l.what, kept)
			}
		}
	}
}

// keptKnown says, per known finding, which executions' inputs and traces
// the campaign kept (fuzz.KnownInputs) and how to replay one: a known
// finding is matched by its message only, and another cause can write it.
func keptKnown(stdout io.Writer, camp, file string) {
	inputs := fuzz.KnownInputs(camp)
	for _, why := range slices.Sorted(maps.Keys(inputs)) {
		in := inputs[why]
		fmt.Fprintf(stdout, "figures: %s kept of the known finding %q (input, and its trace and log beside it): %s\n  tell it from a look-alike: read the trace, or stalefuzz replay %s %s --count 20\n",
			executionsWord(len(in)), why, strings.Join(in, ", "), file, in[0])
	}
}

// executionsWord is "1 execution" or "N executions".
func executionsWord(n int) string {
	if n == 1 {
		return "1 execution"
	}
	return fmt.Sprintf("%d executions", n)
}

// workDir makes a work directory in $TMPDIR owned by a reaper (package
// proxy/reaper): what is started with its Start, and the directory, are
// removed however this process ends, SIGKILL included. Stop removes both.
func workDir(prefix string) (string, *reaper.Reaper, error) {
	work, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	rp, err := reaper.New(work)
	if err != nil {
		_ = os.RemoveAll(work)
		return "", nil, err
	}
	return work, rp, nil
}

// runBinary runs cmd, copying its combined output line by line to w (each
// line through edit), and returns the output and exit status. An interrupt
// stops it (its workers stop with it: they are its children, in its
// process group).
func runBinary(rp *reaper.Reaper, cmd *exec.Cmd, w io.Writer, edit func(string) string) (string, int, error) {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	if err := rp.Start(cmd); err != nil { // its own process group, killed if this process dies
		return "", 0, fmt.Errorf("unable to run the fuzz binary: %w", err)
	}
	defer rp.Forget(cmd.Process.Pid)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			interrupted.Store(true)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		}
	}()
	var all strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			fmt.Fprintln(w, edit(sc.Text()))
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return all.String(), ee.ExitCode(), nil
	case err != nil:
		return all.String(), 0, fmt.Errorf("the fuzz binary: %w", err)
	}
	return all.String(), 0, nil
}

// executions is the workers' own count of executions (their stats files
// in the campaign directory), the corpus replay and minimization included.
func executions(camp string) int {
	n := 0
	files, _ := filepath.Glob(filepath.Join(camp, "stats-*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, m := range statsRE.FindAllStringSubmatch(string(b), -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
	}
	return n
}

var (
	runRE       = regexp.MustCompile(`(?m)^\s*--- (FAIL|PASS): ` + driverFn + `/(\S+)`)
	unjudgedRE  = regexp.MustCompile(regexp.QuoteMeta(fuzz.Unjudged) + ` ` + driverFn + `/(\S+):`)
	startRE     = regexp.MustCompile(`(?m)^=== RUN\s+` + driverFn + `/(\S+)`)
	violationRE = regexp.MustCompile(`(?m)^\s*violation \[([^\]]+)\]`)
)

// replayTally is what a replay's runs showed: how many reproduced (a
// violation, or a known bug's reproduction), ran clean, or could not be
// judged (a harness error in every attempt: they fail their subtest too,
// but reproduce nothing), and in how many runs each oracle was violated.
type replayTally struct {
	violated, clean, unjudged int
	byOracle                  map[string]int
}

// tally reads a replay's runs from the test binary's -test.v output. The
// runs are subtests that run one after another, so what a run logged lies
// between its "=== RUN" line and the next.
func tally(out string) replayTally {
	t := replayTally{byOracle: map[string]int{}}
	notJudged := map[string]bool{}
	for _, m := range unjudgedRE.FindAllStringSubmatch(out, -1) {
		notJudged[m[1]] = true
	}
	for _, m := range runRE.FindAllStringSubmatch(out, -1) {
		switch {
		case m[1] == "PASS":
			t.clean++
		case notJudged[m[2]]:
			t.unjudged++
		default:
			t.violated++
		}
	}
	// A known bug's reproduction passes its run and says so.
	if known := strings.Count(out, "reproduced the known bug"); known > 0 {
		t.violated, t.clean = known, t.violated+t.clean-known
	}
	starts := startRE.FindAllStringIndex(out, -1)
	for i, st := range starts {
		end := len(out)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		seen := map[string]bool{}
		for _, m := range violationRE.FindAllStringSubmatch(out[st[1]:end], -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				t.byOracle[m[1]]++
			}
		}
	}
	return t
}

// oracles says in how many runs each oracle was violated, most first:
// "count in 14 runs, end-state in 3".
func (t replayTally) oracles() string {
	names := slices.Collect(maps.Keys(t.byOracle))
	slices.SortFunc(names, func(a, b string) int {
		if c := t.byOracle[b] - t.byOracle[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s in %d", n, t.byOracle[n])
	}
	return strings.Join(parts, ", ")
}

// replay runs b, the corpus file of input, count times: from origin.
func replay(ctx context.Context, stdout, stderr io.Writer, file, input string, b []byte, origin string, count int, findings string) error {
	work, rp, err := workDir("stalefuzz-replay-")
	if err != nil {
		return exitError{exitHarness, err}
	}
	defer rp.Stop()
	abs, bin, err := prepare(ctx, stderr, file, work, false)
	if err != nil {
		return err
	}
	corpus := filepath.Join(work, "testdata", "fuzz", driverFn)
	if err := os.MkdirAll(corpus, 0o755); err != nil {
		return exitError{exitHarness, err}
	}
	// One copy per run, so that the runs share one control plane (a
	// subtest each): -test.count would start the target afresh each time.
	name := filepath.Base(input)
	for i := range count {
		if err := os.WriteFile(filepath.Join(corpus, fmt.Sprintf("%s.%d", name, i+1)), b, 0o644); err != nil {
			return exitError{exitHarness, err}
		}
	}
	if findings, err = filepath.Abs(findings); err != nil {
		return exitError{exitHarness, err}
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+driverFn+"/"+regexp.QuoteMeta(name)+`\.[0-9]+$`, "-test.v")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "STALEFUZZ_TARGET="+abs, "STALEFUZZ_FINDINGS="+findings, "STALEFUZZ_NO_SEEDS=1", "STALEFUZZ_INPUT_ORIGIN="+origin)
	out, _, err := runBinary(rp, cmd, stdout, func(s string) string { return s })
	if err != nil {
		return exitError{exitHarness, err}
	}
	t := tally(out)
	if t.violated+t.clean == 0 {
		if t.unjudged > 0 {
			fmt.Fprintf(stdout, "result: none of %d runs could be judged (harness errors, not findings)\n", t.unjudged)
			return exitError{exitHarness, errors.New("harness errors")}
		}
		return exitError{exitHarness, fmt.Errorf("the input ran no execution (output above)")}
	}
	notJudged := ""
	if t.unjudged > 0 {
		notJudged = fmt.Sprintf(" (%d more could not be judged: harness errors, not findings)", t.unjudged)
	}
	fmt.Fprintf(stdout, "result: reproduced in %d/%d runs of %s%s\ninput from: %s\n%s", t.violated, t.violated+t.clean, input, notJudged, origin, patchNote())
	if len(t.byOracle) > 0 {
		// Which violation: a run may reproduce by another oracle than the
		// finding's.
		fmt.Fprintf(stdout, "violations by oracle (runs): %s\n", t.oracles())
	}
	if t.violated > 0 {
		return exitError{exitFinding, fmt.Errorf("reproduced %d/%d", t.violated, t.violated+t.clean)}
	}
	return nil
}

// junitSuite is the JUnit XML of one campaign: one test case, failed by a
// finding, in error when the campaign could not run.
type junitSuite struct {
	XMLName  xml.Name `xml:"testsuite"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Time     float64  `xml:"time,attr"`
	Case     struct {
		Name    string      `xml:"name,attr"`
		Failure *junitIssue `xml:"failure,omitempty"`
		Error   *junitIssue `xml:"error,omitempty"`
	} `xml:"testcase"`
}

type junitIssue struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

func writeJUnit(path, file, verdict, out string, elapsed time.Duration) error {
	s := junitSuite{Name: "stalefuzz", Tests: 1, Time: elapsed.Seconds()}
	s.Case.Name = "fuzz " + file
	switch verdict {
	case "finding":
		s.Failures = 1
		s.Case.Failure = &junitIssue{Message: "stalefuzz found a violation", Body: out}
	case "harness":
		s.Errors = 1
		s.Case.Error = &junitIssue{Message: "the campaign could not run (not a finding)", Body: out}
	}
	b, err := xml.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644); err != nil {
		return fmt.Errorf("unable to write JUnit XML: %w", err)
	}
	return nil
}

// copyFiles copies the regular files of dir src into dst (made if need be),
// keeping their names: Go's corpus entries are named by their content's
// hash, so copying merges. A missing src copies nothing.
func copyFiles(src, dst string) (int, error) {
	entries, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return n, err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func newFalseAlarmsCmd() *cobra.Command {
	var (
		count    int
		findings string
		knobs    map[string]string
		answer   string
	)
	cmd := &cobra.Command{
		Use:   "false-alarms TARGET.yaml",
		Short: "Judge the target under ordinary latency only: its races, and its oracles' false alarms",
		Long: `false-alarms runs two no-fault reference runs per knob setting, then
--count executions under ordinary latency only: every watch of every
client delayed by no more than the apiserver itself delayed one in those
runs, the knob settings in turn. Nothing in such a run is a fault a busy
apiserver does not produce, so each violation is triaged:

  race            a finding under ordinary latency: no no-fault run explains
                  it away (a lost update, a write behind its writer's own, a
                  crash, or an end-state or count difference that none of up
                  to 10 more no-fault runs of the setting shows)
  false alarm     the controller's own nondeterminism, with the evidence: the
                  same difference in more no-fault runs, or a field they vary,
                  and no write behind its writer's own to explain it: add an
                  endState ignore path for it

Each execution with a violation (not a known finding) is kept in --findings:
its trace, picture, controllers' log and input, with the command that
replays it. The exit status is 1 when any execution raised a race or a false
alarm, 0 when none did, 2 for a usage or harness error.

--answer lose|reset|slow|reject|reject-500|reject-503 adds to every
execution one fault on the answer to a controller's Nth write (the
controller and N drawn at random within what the reference runs wrote), to
measure that fault's false alarms the same way; the target file's space must
be composed (faults.space: composed, in a copy beside it).`,
		Args: exactArgs("TARGET.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 {
				return usagef(cmd, "--count %d: want at least 1", count)
			}
			if answer != "" && !slices.Contains(target.Answers, answer) {
				return usagef(cmd, "--answer %q: want one of %s", answer, strings.Join(target.Answers, ", "))
			}
			return falseAlarms(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], count, findings, knobs, answer)
		},
	}
	cmd.Flags().IntVar(&count, "count", 200, "how many executions to judge")
	cmd.Flags().StringVar(&answer, "answer", "", "also a fault on the answer to a controller's write in every execution: "+strings.Join(target.Answers, ", ")+" (the target's space must be composed)")
	cmd.Flags().StringToStringVar(&knobs, "knob", nil, "only the knob settings with this value, by the target file's names (--knob write=blind; repeat or join with commas for more)")
	cmd.Flags().StringVar(&findings, "findings", "stalefuzz-findings", "directory for the traces, pictures, logs and inputs of the executions that raised a violation")
	return cmd
}

// falseAlarms runs the driver's TestFalseAlarms on file and reports its
// figure, then each execution that raised a violation with its triage and
// the command that replays it.
func falseAlarms(ctx context.Context, stdout, stderr io.Writer, file string, count int, findings string, knobs map[string]string, answer string) error {
	dir, err := filepath.Abs(findings)
	if err != nil {
		return exitError{exitHarness, err}
	}
	var only []string
	for _, k := range slices.Sorted(maps.Keys(knobs)) {
		only = append(only, k+"="+knobs[k])
	}
	out, runErr, err := runDriverTest(ctx, stderr, file, "TestFalseAlarms", "STALEFUZZ_FALSE_ALARMS="+strconv.Itoa(count),
		"STALEFUZZ_FALSE_ALARMS_DIR="+dir, "STALEFUZZ_FALSE_ALARMS_KNOBS="+strings.Join(only, ","), "STALEFUZZ_FALSE_ALARMS_ANSWER="+answer)
	if err != nil {
		return err
	}
	f, ok := parseLine[fuzz.FalseAlarms](out, driver.FalseAlarmsPrefix)
	if !ok {
		return exitError{exitHarness, fmt.Errorf("measuring the false alarms of %s gave no figure (%v); its output is above", file, runErr)}
	}
	fmt.Fprintf(stdout, "result: %s: %s\n%s", file, f, patchNote())
	writeSelfViewKinds(stdout, f.SelfViewKinds)
	for _, a := range f.Alarms {
		what := "race (a finding under ordinary latency)"
		if answer != "" {
			what = "race (a finding under ordinary latency and a " + answer + " answer)"
		}
		if a.Verdict == fuzz.Nondeterminism {
			what = "false alarm (the controller's nondeterminism)"
		}
		fmt.Fprintf(stdout, "execution %d, %s: %s\n  schedule: %s\n", a.Execution, what, a.Why, a.Schedule)
		for _, v := range a.Violations {
			fmt.Fprintf(stdout, "  [%s] %s\n", v.Oracle, v.Message)
		}
		if a.Files.Trace != "" {
			fmt.Fprintf(stdout, "  trace: %s\n  picture: %s\n  controllers' log: %s\n", a.Files.Trace, a.Files.Picture, a.Files.Log)
		}
		switch {
		case a.Files.Input != "":
			fmt.Fprintf(stdout, "  replay it: stalefuzz replay %s %s --count 20%s\n", file, a.Files.Input, patchArgs())
		default:
			fmt.Fprintf(stdout, "  replay it: stalefuzz replay %s --schedule %q --count 20%s\n", file, a.Schedule, patchArgs())
		}
	}
	if races := f.RaceExecutions(); races > 0 || len(f.ByOracle) > 0 {
		return exitError{exitFinding, fmt.Errorf("%s: %d races and false alarms in %d executions", file, len(f.Alarms), f.Executions)}
	}
	return nil
}

// writeSelfViewKinds lists the kinds of write behind its writer's own that
// replaced that write's values for good, so that each kind is read once.
func writeSelfViewKinds(w io.Writer, kinds []fuzz.SelfViewKind) {
	if len(kinds) == 0 {
		return
	}
	fmt.Fprintf(w, "writes behind their writer's own that replaced its values for good, by kind (%d; read each: a value lost, or one the writer recomputed; the stale-self-view oracle judges them when the target sets oracles.staleSelfView):\n", len(kinds))
	for _, k := range kinds {
		fmt.Fprintf(w, "  %s: %d writes in %d executions\n    first, execution %d: %s\n", k, k.Writes, k.Executions, k.FirstExecution, k.First)
	}
}

// runDriverTest prepares file, builds the driver's test binary and runs its
// test with env added, in a work directory it removes. Its output goes to
// stderr and is returned, with the test's own error (a failed test still
// prints what it measured); err is a harness error before it ran.
func runDriverTest(ctx context.Context, stderr io.Writer, file, test string, env ...string) (out string, runErr, err error) {
	work, rp, err := workDir("stalefuzz-" + strings.ToLower(strings.TrimPrefix(test, "Test")) + "-")
	if err != nil {
		return "", nil, exitError{exitHarness, err}
	}
	defer rp.Stop()
	abs, bin, err := prepare(ctx, stderr, file, work, false)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+test+"$", "-test.v", "-test.timeout=0")
	cmd.Dir = work
	cmd.Env = append(append(os.Environ(), "STALEFUZZ_TARGET="+abs), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, stderr), stderr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := rp.Start(cmd); err != nil {
		return "", nil, exitError{exitHarness, err}
	}
	runErr = cmd.Wait()
	rp.Forget(cmd.Process.Pid)
	return buf.String(), runErr, nil
}

// parseLine finds the line of JSON after prefix that a driver test printed.
func parseLine[T any](out, prefix string) (T, bool) {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			var v T
			if json.Unmarshal([]byte(rest), &v) == nil {
				return v, true
			}
		}
	}
	var zero T
	return zero, false
}
