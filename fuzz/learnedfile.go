package fuzz

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The coordinator of a campaign runs the no-fault reference runs the
// learned oracles need (count, end state, lost update over any field,
// storm) once, in the control plane it starts for the reference seeds, and
// writes what they taught to the campaign's directory; each worker reads it
// instead of running them again, so that its warm-up is its control plane
// and one warm-up execution. A knob setting the file lacks (its reference
// runs were not clean, or there are more than maxSharedSettings settings) is
// learned by the worker on first need, as before.

// maxSharedSettings is how many knob settings the coordinator learns before
// fuzzing (as prepareReferences does in a worker).
const maxSharedSettings = 16

// learnedFileVersion is bumped whenever learned's meaning changes, so that a
// worker never reads a file another version of stalefuzz wrote.
const learnedFileVersion = 1

type learnedFile struct {
	Version  int
	Scenario string
	// Settings are the clean knob settings' learned references, by key
	// (fmt.Sprint of the knobs).
	Settings map[string]learnedJSON
}

type learnedJSON struct {
	Counts    []map[string]int
	Ends      []endReferenceJSON
	Widened   bool
	Settled   bool
	Rewritten map[string]bool
	Diverged  string   `json:",omitempty"`
	GaveUp    []string `json:",omitempty"`
}

type endReferenceJSON struct {
	Objects endObjects
	// Masked: key → masked paths; null: the whole object (endReference).
	Masked map[string]map[string]bool
}

func learnedFilePath(target string) string {
	return filepath.Join(campaignDir(), "learned-"+target+".json")
}

// learnAll learns every knob setting (up to maxSharedSettings) as a worker's
// prepareReferences would, keeping the first reference run of each for
// referenceSeeds, and returns how many were clean and the settings that
// were not.
func (e *Env) learnAll(ctx context.Context) (clean int, unclean []map[string]int) {
	e.refRuns = map[string]*Result{}
	for _, c := range knobSettings(e.s.Knobs, maxSharedSettings) {
		ref := e.learnedReference(ctx, c)
		if ref == nil {
			unclean = append(unclean, c)
			continue
		}
		clean++
		if len(e.s.EndStates) > 0 && ref.diverged == "" {
			e.widenEndStates(ctx, c, ref)
		}
	}
	return clean, unclean
}

// writeLearned writes the clean learned references to path.
func (e *Env) writeLearned(path string) error {
	out := learnedFile{Version: learnedFileVersion, Scenario: e.s.Name, Settings: map[string]learnedJSON{}}
	for key, ref := range e.learnedRefs {
		if ref == nil {
			continue
		}
		j := learnedJSON{Counts: ref.counts, Widened: ref.widened, Settled: ref.settled, Rewritten: ref.rewritten, Diverged: ref.diverged, GaveUp: ref.gaveUp}
		for _, er := range ref.ends {
			j.Ends = append(j.Ends, endReferenceJSON{Objects: er.objects, Masked: er.masked})
		}
		out.Settings[key] = j
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("scenario %s: unable to encode the learned references: %w", e.s.Name, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("scenario %s: unable to write the learned references: %w", e.s.Name, err)
	}
	return os.Rename(tmp, path)
}

// readLearned loads the learned references the coordinator wrote to path
// into e, and returns how many settings it read. A missing file reads none.
func (e *Env) readLearned(path string) (int, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("scenario %s: unable to read the learned references: %w", e.s.Name, err)
	}
	var in learnedFile
	if err := json.Unmarshal(b, &in); err != nil {
		return 0, fmt.Errorf("scenario %s: learned references %s: %w", e.s.Name, path, err)
	}
	if in.Version != learnedFileVersion || in.Scenario != e.s.Name {
		return 0, fmt.Errorf("scenario %s: learned references %s are version %d of scenario %q, want version %d", e.s.Name, path, in.Version, in.Scenario, learnedFileVersion)
	}
	n := 0
	for key, j := range in.Settings {
		if len(j.Counts) != len(e.s.Counts) || len(j.Ends) != len(e.s.EndStates) {
			return 0, fmt.Errorf("scenario %s: learned references %s judge %d counts and %d end states, the scenario has %d and %d", e.s.Name, path, len(j.Counts), len(j.Ends), len(e.s.Counts), len(e.s.EndStates))
		}
		ref := &learned{counts: j.Counts, widened: j.Widened, settled: j.Settled, rewritten: j.Rewritten, diverged: j.Diverged, gaveUp: j.GaveUp}
		if ref.rewritten == nil {
			ref.rewritten = map[string]bool{}
		}
		for _, er := range j.Ends {
			ref.ends = append(ref.ends, endReference{objects: er.Objects, masked: er.Masked})
		}
		e.learnedRefs[key] = ref
		n++
	}
	return n, nil
}
