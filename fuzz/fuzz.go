package fuzz

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz/internal/signal"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Decode turns any byte string into a valid schedule for s; it never fails.
// See the layout on codec.decode.
func (s Scenario) Decode(b []byte) Schedule { return s.codec(s.Space).decode(b) }

// Encode is Decode's inverse for schedules Decode can produce, for writing
// seeds by hand.
func (s Scenario) Encode(sch Schedule) []byte { return s.codec(s.Space).encode(sch) }

// EncodeExactly is Encode for a schedule the scenario's space can hold
// exactly; otherwise an error names the first step it cannot (ordinary
// latency outside RealisticLatency, a fault outside Realistic's spaces, a
// second fault, a duration between two the layout can write) and what it
// would replay instead.
func (s Scenario) EncodeExactly(sch Schedule) ([]byte, error) {
	b := s.Encode(sch)
	got := s.Decode(b)
	if reflect.DeepEqual(normalized(got), normalized(sch)) {
		return b, nil
	}
	for i, st := range sch.Steps {
		if i >= len(got.Steps) {
			return nil, fmt.Errorf("space %v holds at most %d steps: %q is not held", s.Space, MaxSteps, st)
		}
		if !reflect.DeepEqual(normalized(Schedule{Steps: []Step{got.Steps[i]}}), normalized(Schedule{Steps: []Step{st}})) {
			return nil, fmt.Errorf("space %v cannot hold step %d exactly: %q would replay as %q", s.Space, i+1, st, got.Steps[i])
		}
	}
	return nil, fmt.Errorf("space %v cannot hold %q exactly: it would replay as %q", s.Space, sch, got)
}

// normalized is sch with its empty slices nil and its knobs map never nil,
// for comparing schedules whatever built them.
func normalized(sch Schedule) Schedule {
	out := Schedule{Knobs: map[string]int{}}
	for k, v := range sch.Knobs {
		out.Knobs[k] = v
	}
	for _, st := range sch.Steps {
		if len(st.Types) == 0 {
			st.Types = nil
		}
		if len(st.Verbs) == 0 {
			st.Verbs = nil
		}
		out.Steps = append(out.Steps, st)
	}
	return out
}

// Fuzz is the whole fuzz target for a scenario:
//
//	func FuzzMine(f *testing.F) { fuzz.Fuzz(f, myScenario) }
//
// It starts a control plane and proxy once per process that executes inputs
// (never in go test -fuzz's coordinator, which executes none), outside the
// 10 s per-input clock; decodes each input into a schedule; runs it; feeds the
// trace's features to the fuzzer as coverage; and fails with a report, the
// trace's path and the schedule when an oracle is violated. A harness error
// (the execution could not be judged) fails a regression run if it recurs in
// three attempts, and is logged and skipped while fuzzing so that it is never
// recorded as a finding.
//
// Findings' traces go to $STALEFUZZ_FINDINGS, default
// $TMPDIR/stalefuzz-findings.
func Fuzz(f *testing.F, s Scenario) {
	f.Helper()
	// A mistake in the scenario is refused before anything starts, in the
	// coordinator and in every worker alike.
	if err := s.Validate(); err != nil {
		f.Fatal(err)
	}
	if s.Long > 0 && flagValue("test.fuzz") != "" {
		f.Fatalf("scenario %s: its executions may last %v (Scenario.Long), and go test -fuzz kills an input after 10 s: run its campaign with package fuzz/longrun's driver (stalefuzz fuzz does, for a target file with a budget); go test without -fuzz replays its corpus", s.Name, s.Long)
	}
	shard, err := shardFromEnv()
	if err != nil {
		f.Fatal(err)
	}
	if flagValue("test.fuzz") == "" {
		shard = Shard{0, 1} // a regression run replays everything
	}
	// The coordinator of go test -fuzz owns the corpus: it must get the
	// seeds too (test.fuzz is set in it and in its workers).
	seeds := 0
	origins := map[string]string{} // input → where it came from, for findings
	if os.Getenv("STALEFUZZ_NO_SEEDS") == "" && (flagValue("test.fuzz") != "" || !s.SeedsOnlyFuzzing) {
		for i, seed := range s.Seeds {
			b := s.Encode(seed)
			if !shard.Owns(s, b) {
				continue
			}
			f.Add(b)
			origins[string(b)] = fmt.Sprintf("the scenario's seed %d", i)
			seeds++
		}
	}
	// A regression run with nothing to replay starts no control plane.
	if flagValue("test.fuzz") == "" && seeds == 0 {
		if entries, _ := os.ReadDir(filepath.Join("testdata", "fuzz", f.Name())); len(entries) == 0 {
			f.Skipf("scenario %s: no committed corpus entries (testdata/fuzz/%s) and no seeds to replay", s.Name, f.Name())
		}
	}
	// While fuzzing, the scenario without lag in each knob setting is a seed
	// too, after the others: a race that needs no fault shows there.
	var noLag [][]byte
	if os.Getenv("STALEFUZZ_NO_SEEDS") == "" && flagValue("test.fuzz") != "" {
		noLag = noLagSeeds(s, origins)
	}
	if isCoordinator(f.Name()) {
		coordinate(f.Name(), s.Name, func() {
			// The coordinator owns the corpus: seeds from reference runs
			// are added here, before fuzzing starts.
			seeds := os.Getenv("STALEFUZZ_NO_SEEDS") == "" && s.Space.anchored()
			learn := s.Storm || s.needsLearned()
			if seeds || learn {
				runReferences(f, s, shard, seeds, learn)
			}
			for _, b := range noLag {
				if shard.Owns(s, b) {
					f.Add(b)
				}
			}
		}, func() { f.Fuzz(func(*testing.T, []byte) {}) })
		return
	}
	fuzzing := isFuzzing()
	env, err := NewEnv(s)
	if err != nil {
		if fuzzing {
			workerFailed(err) // the coordinator prints it: a worker's output goes nowhere
		}
		f.Fatal(err)
	}
	f.Cleanup(func() {
		if err := env.Stop(); err != nil {
			f.Errorf("scenario %s: %v", s.Name, err)
		}
	})
	if fuzzing && (s.Differential != nil || s.Storm || s.needsLearned() || len(s.Counts) > 0) {
		began := time.Now()
		env.prepareReferences(f.Name(), f.Logf)
		env.Ready.References = time.Since(began)
	}
	worker := env.Worker()
	f.Fuzz(func(t *testing.T, input []byte) {
		if !shard.Owns(s, input) {
			// Another shard executes it (Shard): skipped before anything
			// runs, and not counted as an execution.
			t.Skipf("shard %d/%d: another shard's schedule", shard.K, shard.N)
		}
		if fuzzing {
			v := worker.Judge(context.Background(), input, func() string { return fuzzOrigin(f.Name(), input, s.Decode(input), origins) })
			if v.Err != nil {
				t.Skip(v.Err)
			}
			signal.Hit(v.Features)
			if v.Finding != nil && !searchingOn() {
				// Written and logged; with SearchOnEnv the campaign
				// reports it from findings.log, and searches on.
				t.Fatal(v.Finding.Message(f.Name(), input))
			}
			return
		}
		sched := s.Decode(input)
		// In a regression run, an execution that could not be judged (a
		// controller slower than its start budget on a loaded machine) is
		// run again, up to three times in all, before it fails the test.
		const attempts = 3
		res, err := env.Run(context.Background(), sched, Retries(attempts))
		if err != nil {
			// The marker names the run, so that a replay counts it apart
			// from the runs that were judged (stalefuzz replay).
			t.Fatalf("%s %s: schedule %s: %v", Unjudged, t.Name(), sched, err)
		}
		signal.Hit(Features(res, s.Features))
		if s.KnownBug != "" && !strings.Contains(t.Name(), "/seed#") {
			// A window timed from the mark can miss its event on a loaded
			// machine: the entry reproduces when one of KnownBugRuns does.
			runs := 1
			for len(res.Violations) == 0 && runs < KnownBugRuns {
				if res, err = env.Run(context.Background(), sched, Retries(attempts)); err != nil {
					t.Fatalf("%s %s: schedule %s: %v", Unjudged, t.Name(), sched, err)
				}
				runs++
			}
			if len(res.Violations) == 0 {
				t.Fatalf("corpus entry no longer reproduces the known bug (%s): schedule %s ran clean %d times", s.KnownBug, sched, runs)
			}
			// Its trace and picture only when asked for (make picture): a
			// plain go test run leaves nothing behind.
			written := ""
			if os.Getenv("STALEFUZZ_FINDINGS") != "" {
				files := writeFinding(res, s.Name, input, replayedOrigin(t.Name()))
				written = fmt.Sprintf("\ntrace: %s\npicture: %s\ncontrollers' log: %s", files.trace, files.picture, files.logs)
			}
			t.Logf("reproduced the known bug (%s):\n%s%s", s.KnownBug, res.Report(), written)
			return
		}
		if len(res.Violations) == 0 {
			return
		}
		origin, ok := origins[string(input)]
		if !ok {
			origin = replayedOrigin(t.Name())
		}
		// go test -fuzz saves a mutated input in testdata, a failing seed
		// nowhere: the entry is written next to the trace either way.
		files := writeFinding(res, s.Name, input, origin)
		t.Fatal((&Finding{Report: res.Report(), Origin: origin, Trace: files.trace, Picture: files.picture, Logs: files.logs,
			Entry: files.entry, EntryName: files.entryName, EntryErr: files.entryErr}).Message(f.Name(), input))
	})
}

// fuzzOrigin says where a fuzzing worker's input came from: a seed
// (origins), a reference-run seed, or the mutator.
func fuzzOrigin(target string, input []byte, sched Schedule, origins map[string]string) string {
	if o, ok := origins[string(input)]; ok {
		return o
	}
	switch i := referenceSeedIndex(target, input); {
	case i >= 0 && sched.LatencyOnly():
		return fmt.Sprintf("reference-run seed %d (ordinary latency, at what the reference runs measured)", i)
	case i >= 0:
		return fmt.Sprintf("reference-run seed %d", i)
	}
	return "the mutator"
}

// noLagSeeds encodes the scenario without lag in each of its first
// MaxReferenceSettings knob settings (fewest knobs away from zero first),
// leaving out inputs origins already has, and records their origin there.
func noLagSeeds(s Scenario, origins map[string]string) [][]byte {
	var out [][]byte
	for _, knobs := range knobSettings(s.Knobs, MaxReferenceSettings) {
		b := s.Encode(Schedule{Knobs: knobs})
		if _, dup := origins[string(b)]; !dup {
			origins[string(b)] = fmt.Sprintf("the no-lag seed %d", len(out))
			out = append(out, b)
		}
	}
	return out
}

// runReferences runs the scenario's reference runs in a control plane of
// the coordinator's own, stopped before fuzzing begins: when learn, those the
// learned oracles need, written for the workers (learnAll, writeLearned);
// when seeds, one per knob setting (those already run serve), from which it
// adds the seeds referenceSeeds derives. It says on stderr what it is doing:
// it takes seconds before the first execution.
func runReferences(f *testing.F, s Scenario, shard Shard, seeds, learn bool) {
	began := time.Now()
	fmt.Fprintf(os.Stderr, "stalefuzz: %s: reference runs without faults, once for every worker (a control plane of their own, then the campaign)\n", s.Name)
	env, err := newEnv(s, false)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stalefuzz: %s: no reference runs: %v\n", s.Name, err)
		return
	}
	if learn {
		path := learnedFilePath(f.Name())
		_ = os.Remove(path)
		clean, unclean := env.learnAll(context.Background())
		if err := env.writeLearned(path); err != nil {
			fmt.Fprintf(os.Stderr, "stalefuzz: %s: %v (each worker learns them itself)\n", s.Name, err)
		}
		fmt.Fprintf(os.Stderr, "stalefuzz: %s: the learned oracles' references: %d of %d knob settings clean, in %.1fs\n", s.Name, clean, clean+len(unclean), time.Since(began).Seconds())
		if len(unclean) > 0 {
			for _, c := range unclean {
				fmt.Fprintf(os.Stderr, "stalefuzz: %s: knob settings %v not clean, %s: each worker tries them again and judges them without the learned oracles if they stay so\n", s.Name, c, env.unclean[fmt.Sprint(c)])
			}
		}
		for _, key := range slices.Sorted(maps.Keys(env.learnedRefs)) {
			if ref := env.learnedRefs[key]; ref != nil && ref.diverged != "" && len(s.EndStates) > 0 {
				fmt.Fprintf(os.Stderr, "stalefuzz: %s: knob settings %s: the two no-fault reference runs' workload waits gave up differently (%s): end states are not judged for them; give that wait a longer timeout\n", s.Name, key, ref.diverged)
			} else if ref != nil && len(ref.gaveUp) > 0 && len(s.EndStates) > 0 {
				fmt.Fprintf(os.Stderr, "stalefuzz: %s: knob settings %s: workload waits gave up in both no-fault reference runs (%s): the workflow as written; a run is judged on its end state when the same waits give up in it\n", s.Name, key, strings.Join(ref.gaveUp, "; "))
			}
		}
	}
	if !seeds {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stalefuzz: %s: %v\n", s.Name, err)
		}
		return
	}
	seedList, err := referenceSeeds(context.Background(), env)
	if serr := env.Stop(); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stalefuzz: %s: no reference seeds: %v\n", s.Name, err)
		return
	}
	var inputs [][]byte
	for _, seed := range seedList {
		b := s.Encode(seed)
		if !shard.Owns(s, b) {
			continue
		}
		f.Add(b)
		inputs = append(inputs, b)
	}
	writeReferenceSeeds(f.Name(), inputs)
	fmt.Fprintf(os.Stderr, "stalefuzz: %s: %d seeds from reference runs in %.1fs\n", s.Name, len(seedList), time.Since(began).Seconds())
}

// findingName names a finding's files: the scenario and the input's hash.
func findingName(scenario string, input []byte) string {
	return fmt.Sprintf("%s-%x", scenario, sha256.Sum256(input))[:len(scenario)+13]
}

// writeFinding writes an execution's trace and picture into the findings
// directory and returns their paths, or why each was not written.
func writeFinding(res *Result, scenario string, input []byte, origin string) findingFiles {
	var out findingFiles
	dir := findingsDir()
	name, err := reserveFinding(dir, findingName(scenario, input))
	if err != nil {
		msg := "(not written: " + err.Error() + ")"
		return findingFiles{trace: msg, picture: msg, logs: msg, entryErr: err}
	}
	if out.trace, err = res.WriteTrace(dir, name); err != nil {
		out.trace = "(not written: " + err.Error() + ")"
	}
	if out.picture, err = res.WriteReport(dir, name); err != nil {
		out.picture = "(not written: " + err.Error() + ")"
	}
	if out.logs, err = res.WriteLogs(dir, name); err != nil {
		out.logs = "(not written: " + err.Error() + ")"
	}
	out.entry, out.entryName, out.entryErr = writeCorpusEntry(dir, name, input)
	if out.entryErr == nil {
		_ = writeOrigin(dir, name, origin)
	}
	return out
}

// replayedOrigin is where a replayed input came from (not fuzzing: a
// regression run, or stalefuzz replay): what STALEFUZZ_INPUT_ORIGIN says
// (the replay command reads it from the input's .origin file), else the
// corpus entry the test runs.
func replayedOrigin(test string) string {
	if o := os.Getenv("STALEFUZZ_INPUT_ORIGIN"); o != "" {
		return o
	}
	return "the corpus entry " + test
}

// findingFiles are the paths of a finding's files, or why one was not
// written.
type findingFiles struct {
	trace, picture   string
	logs             string // the controllers' log
	entry, entryName string // the corpus entry, and the name go test gives it
	entryErr         error
}

// findingSuffixes are the files of one finding.
// Unjudged begins the failure message of a regression run or replay that
// could not be judged (a harness error in each of its attempts), followed by
// the run's test name: stalefuzz replay counts such runs apart, never as
// reproductions.
const Unjudged = "could not judge"

var findingSuffixes = []string{".jsonl", ".html", ".input", ".log", ".origin"}

// reserveFinding returns base, or base-2, base-3, ...: the first name no
// earlier finding in dir used (a campaign of the same scenario in another
// checkout, the same input found again), reserved by creating its trace
// file, so that a finding never overwrites another's files.
func reserveFinding(dir, base string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("unable to create findings directory %s: %w", dir, err)
	}
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		taken := false
		for _, suffix := range findingSuffixes[1:] {
			if _, err := os.Lstat(filepath.Join(dir, name+suffix)); err == nil {
				taken = true
			}
		}
		if taken {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, name+findingSuffixes[0]), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("unable to reserve the files of finding %s in %s: %w", name, dir, err)
		}
		return name, f.Close()
	}
}

// prepareReferences runs the no-lag reference for every knob setting before
// fuzzing, so that no execution pays for one inside its clock.
func (e *Env) prepareReferences(target string, logf func(format string, args ...any)) {
	// What the coordinator learned for this campaign (learnAll) serves.
	if e.s.Storm || e.s.needsLearned() {
		n, err := e.readLearned(learnedFilePath(target))
		if err != nil {
			logf("%v: learning them again", err)
		}
		if n > 0 {
			logf("scenario %s: the no-fault references of %d knob settings, from the campaign's coordinator", e.s.Name, n)
		}
	}
	combos := knobSettings(e.s.Knobs, math.MaxInt)
	if len(combos) > maxSharedSettings {
		logf("scenario %s: %d knob settings: differential references computed on first use", e.s.Name, len(combos))
		return
	}
	for _, c := range combos {
		if e.s.Differential != nil {
			if _, _, ok := e.reference(context.Background(), c); !ok {
				logf("scenario %s: the no-lag reference run for %v was not clean, or its workload waits gave up and a second one's gave up others: differential off for it", e.s.Name, c)
			}
		}
		if e.s.Storm || e.s.needsLearned() {
			ref := e.learnedReference(context.Background(), c)
			if ref == nil {
				logf("scenario %s: the no-fault reference runs for %v were not clean (%s): the oracles learned from them (count, end state, lost update over any field, storm) do not judge it", e.s.Name, c, e.unclean[fmt.Sprint(c)])
			} else if len(e.s.EndStates) > 0 && ref.diverged != "" {
				logf("scenario %s: the two no-fault reference runs for %v gave up different workload waits (%s): end states are not judged for it; give that wait a longer timeout", e.s.Name, c, ref.diverged)
			} else if len(e.s.EndStates) > 0 {
				if len(ref.gaveUp) > 0 {
					logf("scenario %s: workload waits gave up in both no-fault reference runs for %v (%s): the workflow as written; a run is judged on its end state when the same waits give up in it", e.s.Name, c, strings.Join(ref.gaveUp, "; "))
				}
				if ref.widened {
					continue
				}
				// Here, not on a first difference: an input's
				// execution must fit in go test's 10 s.
				e.widenEndStates(context.Background(), c, ref)
			}
		}
	}
}

// Features are the signal one execution gives the fuzzer: per client, write
// verb × subresource × status code × precondition, consecutive write pairs,
// bucketed 409 counts and event fates, how late the lag made its events
// (powers of two of milliseconds), the oracle phase reached, and the
// scenario's own.
func Features(res *Result, extra func(*Result) []string) []string {
	var fs []string
	conflicts := map[string]int{}
	prev := ""
	reqs := slices.Clone(res.Trace.Requests)
	slices.SortStableFunc(reqs, func(a, b trace.Request) int { return a.Start.Compare(b.Start) })
	for _, r := range reqs {
		if !r.IsWrite() {
			continue
		}
		w := fmt.Sprintf("%s:%s:%s:%d:occ=%v", r.Client, r.Verb, r.Subresource, r.Code, r.SentRV != "")
		fs = append(fs, "write|"+w)
		if prev != "" {
			fs = append(fs, "pair|"+prev+"|"+w)
		}
		prev = w
		if r.Code == 409 {
			conflicts[r.Client]++
		}
	}
	for c, n := range conflicts {
		fs = append(fs, fmt.Sprintf("409|%s|%d", c, bucket(n)))
	}
	for _, r := range reqs {
		if r.FaultKind != "" {
			fs = append(fs, "fault|"+r.Client+"|"+r.Verb+"|"+string(r.FaultKind))
		}
	}
	for _, rs := range res.Restarts {
		fs = append(fs, fmt.Sprintf("restart|%s|lag=%v", rs.Client, rs.Lag > 0))
	}
	fates := map[string]int{}
	held := map[string]bool{}
	for _, ev := range res.Trace.Events {
		if ev.Rule >= 0 {
			fates[ev.Client+"|"+ev.Type+"|"+string(ev.Fate)]++
			// How late the lag made it, by powers of two of
			// milliseconds: ordinary latency at another level is new
			// coverage, so the mutator climbs toward the latency a race
			// needs instead of guessing it.
			if ev.Fate == trace.Released {
				held[fmt.Sprintf("held|%s|%d", ev.Client, bits.Len(uint(ev.Released.Sub(ev.Arrived).Milliseconds())))] = true
			}
		}
	}
	for k := range held {
		fs = append(fs, k)
	}
	for k, n := range fates {
		fs = append(fs, fmt.Sprintf("fate|%s|%d", k, bucket(n)))
	}
	fs = append(fs, fmt.Sprintf("phase|settled=%v|converged=%v", res.Settled, res.Converged))
	for _, v := range res.Violations {
		fs = append(fs, "violation|"+v.Oracle)
	}
	if extra != nil {
		fs = append(fs, extra(res)...)
	}
	return fs
}

// bucket is 0, 1, 2, 3 for counts up to 3, then one bucket per power of two.
func bucket(n int) int {
	if n < 4 {
		return n
	}
	return 2 + bits.Len(uint(n))
}

// isCoordinator reports whether this process is go test -fuzz's coordinator
// for target name: it executes no inputs, so nothing must be started in it.
func isCoordinator(name string) bool {
	fz, worker := flagValue("test.fuzz"), flagValue("test.fuzzworker")
	if fz == "" || worker == "true" {
		return false
	}
	ok, err := regexp.MatchString(fz, name)
	return err == nil && ok
}

// KnownBugRuns is how many runs of a known-bug scenario's corpus entry a
// regression run makes before it says the entry no longer reproduces.
const KnownBugRuns = 3

func isFuzzing() bool { return flagValue("test.fuzzworker") == "true" }

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func findingsDir() string {
	if d := os.Getenv("STALEFUZZ_FINDINGS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "stalefuzz-findings")
}

// writeStats writes how long one worker took to be ready, its execution
// rate, and where an execution's time goes on average, to stats-<pid>.log in the findings directory: go test
// -fuzz's own count leaves out the executions it spends minimizing.
func writeStats(scenario string, ready Readiness, execs, harnessErrs, knownHits int, d time.Duration, mean Phases) {
	w := fmt.Sprintf("%s: worker %d", scenario, os.Getpid())
	line := fmt.Sprintf("%s: ready to fuzz in %s\n%s: %d executions (%d harness errors) in %.0fs of fuzzing: %.1f executions/min\n%s: one execution, on average: %s\n",
		w, ready, w, execs, harnessErrs, d.Seconds(), float64(execs)/d.Minutes(), w, mean)
	if k := knownStats(knownHits); k != "" {
		line += w + k + "\n"
	}
	if os.MkdirAll(campaignDir(), 0o700) == nil {
		_ = os.WriteFile(filepath.Join(campaignDir(), fmt.Sprintf("stats-%d.log", os.Getpid())), []byte(line), 0o600)
	}
}

// logHarnessError appends a harness error to harness-errors.log in the
// findings directory: while fuzzing, a skipped input is otherwise invisible.
func logHarnessError(scenario string, sched Schedule, err error) {
	appendLine(harnessErrorsFile, fmt.Sprintf("%s: schedule %s: %v", scenario, sched, err))
}

// appendLine appends a line to a file of the campaign's directory.
func appendLine(name, line string) {
	dir := campaignDir()
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// findingsFile lists, in a campaign's directory, every finding its
// workers wrote: "<input>\t<schedule>\t<first violation>\t<time>" a line
// (the time in RFC 3339, UTC).
const findingsFile = "findings.log"

// logFinding appends a finding a worker wrote to findings.log. go test
// -fuzz reports the failure that made it, except one: an input that passed
// when run and failed when the worker ran it again before minimizing it
// for its new coverage (internal/fuzz minimizeInput drops that failure).
// The coordinator reads the log so that such a finding is not lost
// (LoggedFindings).
func logFinding(input string, sched Schedule, res *Result) {
	why := ""
	if len(res.Violations) > 0 {
		why = "[" + res.Violations[0].Oracle + "] " + res.Violations[0].Message
	}
	appendLine(findingsFile, strings.Join([]string{input, sched.String(), strings.ReplaceAll(strings.ReplaceAll(why, "\n", " "), "\t", " "), time.Now().UTC().Format(time.RFC3339Nano)}, "\t"))
}

// LoggedFinding is a finding a campaign's worker wrote (findings.log).
type LoggedFinding struct {
	Input, Schedule, Violation string
	// At is when the worker wrote it; zero in a line without a time.
	At time.Time
}

// LoggedFindings reads the findings a campaign's workers wrote, from its
// directory: every finding, including one go test -fuzz did not report.
func LoggedFindings(dir string) []LoggedFinding {
	b, err := os.ReadFile(filepath.Join(dir, findingsFile))
	if err != nil {
		return nil
	}
	var out []LoggedFinding
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, "\t", 4)
		if len(f) >= 3 {
			lf := LoggedFinding{Input: f[0], Schedule: f[1], Violation: f[2]}
			if len(f) == 4 {
				lf.At, _ = time.Parse(time.RFC3339Nano, f[3])
			}
			out = append(out, lf)
		}
	}
	return out
}

// writeCorpusEntry writes input as a go test fuzz v1 corpus file, dir/base.input,
// and returns its path and the name go test would give it (the first 16 hex
// digits of its SHA-256).
func writeCorpusEntry(dir, base string, input []byte) (path, name string, err error) {
	body := string(MarshalCorpusEntry(input))
	name = CorpusEntryName(input)
	path, err = writeFindingFile(dir, base+".input", "corpus entry", func(w io.Writer) error {
		_, err := io.WriteString(w, body)
		return err
	})
	return path, name, err
}

// MarshalCorpusEntry is input as a go test fuzz v1 corpus file holds it
// (what ReadCorpusEntry reads back).
func MarshalCorpusEntry(input []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(input)) + ")\n")
}

// CorpusEntryName is the file name go test -fuzz gives input's corpus
// entry: the first 16 hex digits of the SHA-256 of its file.
func CorpusEntryName(input []byte) string {
	return fmt.Sprintf("%x", sha256.Sum256(MarshalCorpusEntry(input)))[:16]
}

// WriteInput writes input as a go test fuzz v1 corpus file, dir/name.input,
// with where it came from (origin, one line: "a fuzz campaign's mutator",
// "stalefuzz false-alarms, execution 17") in dir/name.origin, which
// stalefuzz replay reads (InputOrigin); both 0600. It returns the input's
// path.
func WriteInput(dir, name string, input []byte, origin string) (string, error) {
	path, _, err := writeCorpusEntry(dir, name, input)
	if err != nil {
		return "", err
	}
	return path, writeOrigin(dir, name, origin)
}

// writeOrigin writes dir/name.origin (nothing for an empty origin).
func writeOrigin(dir, name, origin string) error {
	if origin == "" {
		return nil
	}
	_, err := writeFindingFile(dir, name+".origin", "input's origin", func(w io.Writer) error {
		_, err := io.WriteString(w, strings.TrimSpace(origin)+"\n")
		return err
	})
	return err
}

// InputOrigin is where the input at path came from, as WriteInput recorded
// it beside it (path without its .input, then .origin); "" when nothing
// says.
func InputOrigin(path string) string {
	b, err := os.ReadFile(strings.TrimSuffix(path, ".input") + ".origin")
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// ReadCorpusEntry reads a []byte input from a file go test -fuzz wrote
// (testdata/fuzz/FuzzX/<id>), so that specs can replay a finding.
func ReadCorpusEntry(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("unable to read corpus entry: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("corpus entry %s: want a go test fuzz v1 file with one value", path)
	}
	lit, ok := strings.CutPrefix(lines[1], "[]byte(")
	lit, ok2 := strings.CutSuffix(lit, ")")
	if !ok || !ok2 {
		return nil, fmt.Errorf("corpus entry %s: want a []byte value, got %q", path, lines[1])
	}
	s, err := strconv.Unquote(lit)
	if err != nil {
		return nil, fmt.Errorf("corpus entry %s: %w", path, err)
	}
	return []byte(s), nil
}
