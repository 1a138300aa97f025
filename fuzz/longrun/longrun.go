package longrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// RescanEvery is how many executions pass between two reads of the corpus
// directory for entries other processes of the campaign wrote.
const RescanEvery = 5

// Campaign is one process's part of a campaign of long executions. Its zero
// value searches until ctx ends, keeps no corpus, and says nothing.
type Campaign struct {
	// Target names the campaign's fuzz target as go test would
	// ("FuzzTarget"): a finding's regression row goes to
	// testdata/fuzz/<Target>. Zero: "Fuzz" and the scenario's name.
	Target string
	// Corpus is a directory of go test fuzz v1 files: the campaign starts
	// with its entries and writes there each input it finds interesting.
	// Zero: none is read or kept.
	Corpus string
	// Seeds are more directories of go test fuzz v1 files to run first
	// (a target's testdata/fuzz/<Target>), never written. A directory
	// that does not exist is none.
	Seeds []string
	// Time is how long the campaign searches, its preparation included: no
	// execution starts after it, and the one under way runs to its end.
	// Zero: until ctx ends.
	Time time.Duration
	// Share is this process's share of the inputs run before any mutation
	// (the corpus and seed directories' entries, the seeds), when several
	// processes run one campaign: the Kth of N (fuzz.Shard.Owns), the
	// others run the rest; every process mutates from the whole corpus.
	// Zero: all of them.
	Share fuzz.Shard
	// Rand seeds the mutator. Zero: a random seed.
	Rand uint64
	// Progress gets a line as each input proves interesting, and at least
	// one a minute, in go test -fuzz's words ("fuzz: elapsed: 2m0s, execs:
	// 8 (0/sec), new interesting: 3 (total: 11)"). Zero: nothing.
	Progress io.Writer
}

// Summary is what a campaign did.
type Summary struct {
	// Executions counts every input run; HarnessErrors those that could
	// not be judged.
	Executions, HarnessErrors int
	// Interesting counts the inputs the campaign added to its corpus
	// (entries and seeds included); Corpus is how many it held at the end.
	Interesting, Corpus int
	// Findings are the campaign's findings, in the order they were made.
	Findings []Found
	// Elapsed is the campaign's time, its preparation included.
	Elapsed time.Duration
}

// Found is one finding of a campaign.
type Found struct {
	Input    []byte
	Schedule fuzz.Schedule
	// After is how long after the campaign began it was made.
	After time.Duration
	*fuzz.Finding
}

// entry is an input of the corpus and where it came from.
type entry struct {
	input  []byte
	origin string
}

// Run runs the campaign on scenario s (see the package's contract). The
// error is a harness error (the Env could not start, a corpus directory
// could not be read); findings are in the Summary.
func (c Campaign) Run(ctx context.Context, s fuzz.Scenario) (sum Summary, retErr error) {
	began := time.Now()
	// Time is checked between executions: the last one runs to its end
	// (its budget at most), so that the campaign's end is never a harness
	// error. ctx's end (an interrupt) cuts it short.
	timeLeft := func() bool { return c.Time == 0 || time.Since(began) < c.Time }
	target := c.Target
	if target == "" {
		target = "Fuzz" + s.Name
	}
	progress := c.Progress
	if progress == nil {
		progress = io.Discard
	}
	seed := c.Rand
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := rand.New(rand.NewPCG(seed, 0x57a1ef022))
	defer func() { sum.Elapsed = time.Since(began) }()

	env, err := fuzz.NewEnv(s)
	if err != nil {
		return sum, fmt.Errorf("long campaign of %s: %w", s.Name, err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("long campaign of %s: stop: %w", s.Name, err))
		}
	}()
	logf := func(format string, args ...any) { fmt.Fprintf(progress, "stalefuzz: "+format+"\n", args...) }
	seeds := env.Prepare(ctx, target, logf)

	// The inputs to run before any mutation, in order, without repeats.
	var queue []entry
	queued := map[string]bool{}
	enqueue := func(in []byte, origin string) {
		if !c.Share.Owns(s, in) {
			return // another process of the campaign runs it
		}
		if !queued[string(in)] {
			queued[string(in)] = true
			queue = append(queue, entry{in, origin})
		}
	}
	known := map[string]bool{} // corpus files read, by path
	// adopt, when set, takes an entry into the corpus without running it
	// (another process of the campaign found it interesting).
	var adopt func(entry)
	readDir := func(dir, what string) error {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("long campaign of %s: read %s %s: %w", s.Name, what, dir, err)
		}
		for _, de := range ents {
			path := filepath.Join(dir, de.Name())
			if de.IsDir() || known[path] {
				continue
			}
			known[path] = true
			in, err := fuzz.ReadCorpusEntry(path)
			if err != nil {
				logf("%s: %v (skipped)", s.Name, err)
				continue
			}
			if adopt != nil {
				adopt(entry{in, "the corpus entry " + path})
				continue
			}
			enqueue(in, "the corpus entry "+path)
		}
		return nil
	}
	if c.Corpus != "" {
		if err := os.MkdirAll(c.Corpus, 0o700); err != nil {
			return sum, fmt.Errorf("long campaign of %s: create corpus %s: %w", s.Name, c.Corpus, err)
		}
		if err := readDir(c.Corpus, "corpus"); err != nil {
			return sum, err
		}
	}
	for _, d := range c.Seeds {
		if err := readDir(d, "seed directory"); err != nil {
			return sum, err
		}
	}
	for _, sd := range seeds {
		enqueue(sd.Input, sd.Origin)
	}

	w := env.Worker()
	searchOn := os.Getenv(fuzz.SearchOnEnv) == "1"
	seen := map[string]bool{} // features
	var corpus []entry
	inCorpus := map[string]bool{}
	adopt = func(e entry) {
		if !inCorpus[string(e.input)] {
			inCorpus[string(e.input)] = true
			corpus = append(corpus, e)
		}
	}
	lastLine := time.Now()
	line := func() {
		el := time.Since(began).Round(time.Second)
		fmt.Fprintf(progress, "fuzz: elapsed: %s, execs: %d (%.0f/sec), new interesting: %d (total: %d)\n",
			el, sum.Executions, float64(sum.Executions)/max(1, el.Seconds()), sum.Interesting, len(corpus))
		lastLine = time.Now()
	}
	for ctx.Err() == nil && timeLeft() {
		var in entry
		switch {
		case len(queue) > 0:
			in, queue = queue[0], queue[1:]
		case len(corpus) == 0:
			// Nothing interesting yet (every seed a harness error, or
			// none): mutate the empty input.
			in = entry{mutate(r, nil, nil), "the mutator"}
		default:
			parent := corpus[r.IntN(len(corpus))]
			others := make([][]byte, 0, 4)
			for range 4 {
				others = append(others, corpus[r.IntN(len(corpus))].input)
			}
			in = entry{mutate(r, parent.input, others), "the mutator"}
		}
		v := w.Judge(ctx, in.input, func() string { return in.origin })
		if ctx.Err() != nil && v.Err != nil {
			break // an interrupt cut the execution short: not counted
		}
		sum.Executions++
		if v.Err != nil {
			sum.HarnessErrors++
		}
		fresh := false
		for _, f := range v.Features {
			if !seen[f] {
				seen[f], fresh = true, true
			}
		}
		if fresh && !inCorpus[string(in.input)] {
			inCorpus[string(in.input)] = true
			corpus = append(corpus, in)
			sum.Interesting++
			if c.Corpus != "" {
				path := filepath.Join(c.Corpus, fuzz.CorpusEntryName(in.input))
				known[path] = true
				if err := os.WriteFile(path, fuzz.MarshalCorpusEntry(in.input), 0o600); err != nil {
					logf("%s: keep an interesting input: %v", s.Name, err)
				}
			}
			line()
		}
		if v.Finding != nil {
			sum.Findings = append(sum.Findings, Found{Input: in.input, Schedule: v.Schedule, After: time.Since(began), Finding: v.Finding})
			if !searchOn {
				break
			}
		}
		if c.Corpus != "" && sum.Executions%RescanEvery == 0 {
			// Other processes' interesting inputs are interesting here.
			if err := readDir(c.Corpus, "corpus"); err != nil {
				logf("%v", err)
			}
		}
		if time.Since(lastLine) >= time.Minute {
			line()
		}
	}
	line()
	sum.Corpus = len(corpus)
	slices.SortStableFunc(sum.Findings, func(a, b Found) int { return int(a.After - b.After) })
	return sum, nil
}
