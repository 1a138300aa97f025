package fuzz

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Worker judges a campaign's inputs one by one, as every driver of a
// campaign does: go test -fuzz's workers (Fuzz) and package longrun's
// driver of executions too long for go test. It is the one place where an
// execution's outcome becomes a campaign's record:
//
//   - an execution that could not be judged is a harness error, appended to
//     the campaign directory's harness-errors.log, never a finding;
//   - one whose violations are all known findings (Scenario.Known) is
//     counted in known.log, its first KnownKept executions' inputs and
//     traces kept;
//   - one that only repeats a finding the campaign has written, while
//     searching on (SearchOnEnv), is counted in repeats.log;
//   - any other violation is a finding: its trace, picture, controllers'
//     log, corpus entry and origin are written to the findings directory
//     and it is listed in findings.log.
//
// After each execution it rewrites this process's stats file in the
// campaign directory (the executions, harness errors and known findings,
// and an execution's mean time by phase), which stalefuzz fuzz and the
// coordinator sum. A Worker is not safe for concurrent use: one per Env.
type Worker struct {
	env    *Env
	began  time.Time
	execs  int
	errs   int // harness errors
	known  int // executions with known findings only
	kept   knownKept
	phases Phases // summed over the executions that could be judged
}

// Worker returns a Worker that runs its inputs in e.
func (e *Env) Worker() *Worker { return &Worker{env: e, began: time.Now()} }

// Verdict is what one execution of a campaign's input came to. Exactly one
// of Err, Known, Repeat and Finding is set when the execution was not
// clean; none when it was.
type Verdict struct {
	Schedule Schedule
	// Result is the execution's; nil when it could not be run at all.
	Result *Result
	// Err is a harness error: the execution could not be judged.
	Err error
	// Features are the execution's coverage signal (Features): nil with
	// Err.
	Features []string
	// Known are the known findings the execution met, and nothing else.
	Known []Known
	// Repeat says the execution only met findings this campaign has
	// written already (searching on).
	Repeat bool
	// Finding is a new finding, written.
	Finding *Finding
}

// Finding is a finding a Worker wrote: what an oracle said, and where its
// files are.
type Finding struct {
	// Report is the execution's report (Result.Report).
	Report string
	// Origin says where the input came from: a seed, the mutator.
	Origin string
	// Trace, Picture and Logs are the paths of its trace, picture and
	// controllers' log, or why each was not written.
	Trace, Picture, Logs string
	// Entry is its corpus entry (Go's format), EntryName the name go test
	// gives it in testdata/fuzz/<target>; EntryErr why it was not written.
	Entry, EntryName string
	EntryErr         error
}

// Message is the failure message of a finding of fuzz target target
// ("FuzzTarget"), as go test prints it: the report, the input, the files
// and the command that keeps it as a regression row.
func (f *Finding) Message(target string, input []byte) string {
	keep := fmt.Sprintf("mkdir -p testdata/fuzz/%[1]s && cp %[2]s testdata/fuzz/%[1]s/%[3]s && go test -run='^%[1]s/%[3]s$'", target, f.Entry, f.EntryName)
	if f.EntryErr != nil {
		keep = "(corpus entry not written: " + f.EntryErr.Error() + ")"
	}
	return fmt.Sprintf("%s\ninput: %x (from %s)\ntrace: %s\npicture: %s\ncontrollers' log: %s\nkeep it as a regression row: %s",
		f.Report, input, f.Origin, f.Trace, f.Picture, f.Logs, keep)
}

// Judge runs input once, as a campaign's worker (one attempt: a harness
// error is recorded and skipped), and records what it came to (see
// Worker). An execution that ctx's end cut short is not recorded: its
// Verdict has the error and nothing else. origin says where the input came from; it is asked only for a
// finding.
func (w *Worker) Judge(ctx context.Context, input []byte, origin func() string) Verdict {
	s := w.env.s
	v := Verdict{Schedule: s.Decode(input)}
	v.Result, v.Err = w.env.Run(ctx, v.Schedule, Retries(1))
	if v.Err != nil && ctx.Err() != nil {
		// The driver's end (an interrupt) cut it short: neither an
		// execution nor a harness error.
		return v
	}
	w.execs++
	if v.Err != nil {
		w.errs++
	} else {
		w.phases = w.phases.Add(v.Result.Phases)
		v.Known = s.knownOnly(v.Result.Violations, v.Schedule)
		if v.Known != nil {
			w.known++
		}
	}
	// Rewritten after every execution: go test ends a worker without
	// running its cleanups.
	writeStats(s.Name, w.env.Ready, w.execs, w.errs, w.known, time.Since(w.began), w.phases.Div(w.execs-w.errs))
	if v.Err != nil {
		logHarnessError(s.Name, v.Schedule, v.Err)
		return v
	}
	res := v.Result
	v.Features = Features(res, s.Features)
	switch {
	case len(res.Violations) == 0:
	case v.Known != nil:
		// Counted, and the input kept as interesting (its features
		// include the violation), but the campaign goes on.
		logKnown(v.Schedule, v.Known, w.kept.keep(res, s.Name, input, v.Known))
	case searchingOn() && claimFindings(campaignDir(), res.Violations) == 0:
		// Searching on (SearchOnEnv): only findings this campaign has
		// written already. Counted; the input stays interesting.
		v.Repeat = true
		logRepeat(s.Name, v.Schedule, res)
	default:
		from := origin()
		files := writeFinding(res, s.Name, input, from)
		v.Finding = &Finding{Report: res.Report(), Origin: from, Trace: files.trace, Picture: files.picture, Logs: files.logs,
			Entry: files.entry, EntryName: files.entryName, EntryErr: files.entryErr}
		logFinding(files.entry, v.Schedule, res)
	}
	return v
}

// Seed is an input a campaign runs before it mutates any, and where it
// came from.
type Seed struct {
	Input  []byte
	Origin string
}

// Prepare does in e, for a campaign of fuzz target target run by a driver
// of its own (package longrun), what go test -fuzz's coordinator and each
// of its workers do before the first input, and returns the campaign's
// seeds: the no-fault reference runs the learned oracles (count, end state,
// storm) and the differential need; then, unless STALEFUZZ_NO_SEEDS is
// set, the scenario's seeds, in the anchored spaces those derived from
// reference runs (referenceSeeds), and the scenario without lag in each of
// its first knob settings (noLagSeeds), in that order, without repeats.
// Sharding (STALEFUZZ_SHARD) does not apply. logf, when not nil, says what
// it is doing: reference runs of a long scenario take minutes.
func (e *Env) Prepare(ctx context.Context, target string, logf func(format string, args ...any)) []Seed {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := e.s
	began := time.Now()
	if s.Differential != nil || s.Storm || s.needsLearned() || len(s.Counts) > 0 {
		e.refRuns = map[string]*Result{} // kept for the reference seeds
		e.prepareReferences(target, logf)
		e.Ready.References = time.Since(began)
	}
	if os.Getenv("STALEFUZZ_NO_SEEDS") != "" {
		return nil
	}
	var out []Seed
	seen := map[string]bool{}
	add := func(b []byte, origin string) {
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, Seed{Input: b, Origin: origin})
		}
	}
	for i, seed := range s.Seeds {
		add(s.Encode(seed), fmt.Sprintf("the scenario's seed %d", i))
	}
	if s.Space.anchored() {
		refSeeds, err := referenceSeeds(ctx, e)
		if err != nil {
			logf("scenario %s: no reference seeds: %v", s.Name, err)
		}
		for i, seed := range refSeeds {
			origin := fmt.Sprintf("reference-run seed %d", i)
			if seed.LatencyOnly() {
				origin += " (ordinary latency, at what the reference runs measured)"
			}
			add(s.Encode(seed), origin)
		}
		logf("scenario %s: %d seeds from reference runs", s.Name, len(refSeeds))
	}
	origins := map[string]string{}
	for _, b := range noLagSeeds(s, origins) {
		add(b, origins[string(b)])
	}
	logf("scenario %s: %d seeds, ready in %.1fs", s.Name, len(out), time.Since(began).Seconds())
	return out
}
