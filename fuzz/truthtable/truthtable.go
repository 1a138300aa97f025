package truthtable

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// Options bound Measure. The zero value runs every
// knob setting, the first position of each anchor, twice a cell.
type Options struct {
	// Runs per cell; 0: 2.
	Runs int
	// Positions is how many anchors per client, resource and kind of fault
	// (right after its 1st, 2nd, ... MODIFIED, ADDED or DELETED event, or
	// write); 0: 1.
	Positions int
	// Settings is how many knob settings, those with the fewest knobs away
	// from their first value first; 0: all.
	Settings int
}

// Table is what Measure saw: per pattern (a no-fault run,
// or one fault anchored to an event or a write of a no-fault run, knob
// settings aside) and knob setting, what the runs' oracles said.
type Table struct {
	Runs     int
	Settings []map[string]int
	// Patterns in the order they were run: "no lag" first, then the
	// anchored faults, the kinds taking turns as in the reference seeds.
	Patterns []Pattern
	// Cells[pattern][setting index]; a pattern that a setting's no-fault
	// run gave no anchor for has no cell there.
	Cells map[string]map[int]*Cell
	Took  time.Duration
}

// Pattern is one row of a Table.
type Pattern struct {
	// Schedule is the pattern's schedule, knob settings aside
	// (Schedule.String); the key of Table.Cells.
	Schedule string
	// Cause is what in a real cluster does it (Step.Cause), OnDefaults
	// whether a cluster on 1.37's defaults can (Step.OnDefaults); "" for
	// the no-fault row.
	Cause, OnDefaults string
}

// Cell is one pattern at one knob setting.
type Cell struct {
	// Judged runs, and those that could not be (harness errors, never
	// findings).
	Judged, HarnessErrors int
	// ByOracle counts the judged runs with a violation of each oracle that
	// was not a known finding; Known, per Known.Why, the judged runs whose
	// every violation was a known finding (shown by Why up to its first
	// colon).
	ByOracle map[string]int `json:",omitempty"`
	Known    map[string]int `json:",omitempty"`
	// First is one message per oracle, from the first run that raised it.
	First map[string]string `json:",omitempty"`
	// Input is the cell's schedule as an input of the scenario's space,
	// which replays it, when a run raised a violation that was not a known
	// finding; nil otherwise (or when the space cannot hold it).
	Input []byte `json:",omitempty"`
}

func (c *Cell) add(res *fuzz.Result, known []fuzz.Known) {
	c.Judged++
	if len(res.Violations) == 0 {
		return
	}
	if known != nil {
		if c.Known == nil {
			c.Known = map[string]int{}
		}
		seen := map[string]bool{}
		for _, k := range known {
			if !seen[k.Why] {
				seen[k.Why] = true
				c.Known[k.Why]++
			}
		}
		return
	}
	if c.ByOracle == nil {
		c.ByOracle, c.First = map[string]int{}, map[string]string{}
	}
	seen := map[string]bool{}
	for _, v := range res.Violations {
		if !seen[v.Oracle] {
			seen[v.Oracle] = true
			c.ByOracle[v.Oracle]++
			if c.First[v.Oracle] == "" {
				c.First[v.Oracle] = v.Message
			}
		}
	}
}

// String is the cell as the table shows it: "—" when every judged run was
// clean, else each oracle (or known finding) with its runs out of those
// judged, and the harness errors apart.
func (c *Cell) String() string {
	if c == nil {
		return "n/a"
	}
	var parts []string
	for _, o := range slices.Sorted(maps.Keys(c.ByOracle)) {
		parts = append(parts, fmt.Sprintf("**%s %d/%d**", o, c.ByOracle[o], c.Judged))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Known)) {
		// A known finding by its name: Known.Why up to its first colon
		// ("finding 2: a Job stamped from …" → "finding 2").
		name, _, _ := strings.Cut(k, ":")
		parts = append(parts, fmt.Sprintf("known (%s) %d/%d", name, c.Known[k], c.Judged))
	}
	if len(parts) == 0 {
		if c.Judged == 0 {
			parts = append(parts, "not judged")
		} else {
			parts = append(parts, fmt.Sprintf("— %d/%d", c.Judged, c.Judged))
		}
	}
	if c.HarnessErrors > 0 {
		parts = append(parts, fmt.Sprintf("(%d harness errors)", c.HarnessErrors))
	}
	return strings.Join(parts, ", ")
}

// Measure runs on e, for each knob setting, a no-fault run, derives
// from its trace the anchored one-fault schedules of the scenario's space
// (those the reference seeds come from, families: in Realistic a relist
// after 410 at the client's Nth MODIFIED or DELETED event of a resource, a
// restart right after or before the answer to its Nth write, each also
// onto an apiserver Bounds.MaxDelay behind, a broken watch, a held
// MODIFIED, ADDED or DELETED event; in Composed the answer to its Nth write
// lost, slow, refused with 500 or reset), and runs the
// no-fault schedule and each of those o.Runs times. A harness error is run
// again up to twice and then counted apart. progress, when set, is called
// after each cell.
func Measure(ctx context.Context, e *fuzz.Env, o Options, progress func(pattern string, setting map[string]int, c *Cell)) (Table, error) {
	runs, positions, settings := o.Runs, o.Positions, o.Settings
	if runs <= 0 {
		runs = 2
	}
	if positions <= 0 {
		positions = 1
	}
	if settings <= 0 {
		settings = math.MaxInt
	}
	began := time.Now()
	t := Table{Runs: runs, Settings: e.KnobSettings(settings), Cells: map[string]map[int]*Cell{}}
	noLag := fuzz.Schedule{}.String()
	t.Patterns = append(t.Patterns, Pattern{Schedule: noLag})
	cell := func(pattern string, si int) *Cell {
		if t.Cells[pattern] == nil {
			t.Cells[pattern] = map[int]*Cell{}
		}
		c := &Cell{}
		t.Cells[pattern][si] = c
		return c
	}
	runCell := func(sched fuzz.Schedule, c *Cell) *fuzz.Result {
		var last *fuzz.Result
		for range runs {
			res, err := e.Run(ctx, sched, fuzz.Retries(3))
			if err != nil {
				c.HarnessErrors++
				continue
			}
			known := e.KnownOnly(res.Violations, sched)
			c.add(res, known)
			if len(res.Violations) > 0 && known == nil && c.Input == nil {
				c.Input, _ = e.Input(sched)
			}
			last = res
		}
		return last
	}
	for si, knobs := range t.Settings {
		c := cell(noLag, si)
		ref := runCell(fuzz.Schedule{Knobs: knobs}, c)
		if progress != nil {
			progress(noLag, knobs, c)
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		if ref == nil {
			continue // no judged no-fault run: no anchors for this setting
		}
		byFamily := e.Anchored(knobs, ref.Trace, ref.Mark, positions)
		// The kinds take turns, as in the reference seeds.
		for n := 0; ; n++ {
			more := false
			for _, scheds := range byFamily {
				if n >= len(scheds) {
					continue
				}
				more = true
				sched := scheds[n]
				pattern := fuzz.Schedule{Steps: sched.Steps}.String()
				if !slices.ContainsFunc(t.Patterns, func(p Pattern) bool { return p.Schedule == pattern }) {
					st := sched.Steps[0]
					t.Patterns = append(t.Patterns, Pattern{Schedule: pattern, Cause: st.Cause(), OnDefaults: st.OnDefaults()})
				}
				c := cell(pattern, si)
				runCell(sched, c)
				if progress != nil {
					progress(pattern, knobs, c)
				}
				if ctx.Err() != nil {
					return t, ctx.Err()
				}
			}
			if !more {
				break
			}
		}
	}
	t.Took = time.Since(began)
	return t, nil
}

// Markdown renders the table: a row per pattern, a column per knob setting,
// each setting named by label (nil: "knob=value" pairs, "defaults" for
// the first values).
func (t Table) Markdown(label func(map[string]int) string) string {
	if label == nil {
		label = func(m map[string]int) string {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if m[k] != 0 {
					parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
				}
			}
			if len(parts) == 0 {
				return "defaults"
			}
			return strings.Join(parts, ", ")
		}
	}
	var b strings.Builder
	b.WriteString("| pattern | on 1.37's defaults |")
	for _, s := range t.Settings {
		fmt.Fprintf(&b, " %s |", label(s))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(t.Settings)) + "\n")
	var causes []string
	for _, p := range t.Patterns {
		defaults := p.OnDefaults
		if defaults == "" {
			defaults = "—"
		}
		fmt.Fprintf(&b, "| %s | %s |", strings.ReplaceAll(p.Schedule, "|", `\|`), defaults)
		for si := range t.Settings {
			fmt.Fprintf(&b, " %s |", t.Cells[p.Schedule][si])
		}
		b.WriteString("\n")
		if p.Cause != "" && !slices.Contains(causes, p.Cause) {
			causes = append(causes, p.Cause)
		}
	}
	if len(causes) > 0 {
		b.WriteString("\nWhat in a real cluster does what the patterns do:\n\n")
		for _, c := range causes {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	return b.String()
}
