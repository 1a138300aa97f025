package fuzz

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Known is a finding already reported, which a campaign searches past: a
// fuzzed execution whose every violation a Known matches is counted (in the
// campaign's summary and known.log), not reported as a finding, so that a
// bug found in seconds does not end every campaign; MeasureFalseAlarms
// counts such executions apart from the false alarms. A regression run or a
// replay judges them as usual: a saved input of a known finding still
// reproduces it.
type Known struct {
	// Oracle is the violation's oracle ("count", "end-state",
	// "lost-update", "convergence", "stuck", "storm", "crash").
	Oracle string
	// Message is a substring of the violation's message, specific enough
	// to match this finding only ("live Secrets at once").
	Message string
	// Why names the finding and where it is reported ("finding 1,
	// README.md"); it labels the count in the summary.
	Why string
	// Subject is a substring of the violation's subject, the object or
	// kind it is about ("StatefulSet prometheus-prom"). Zero: any.
	Subject string
	// Faults are the kinds of fault (Step.Kind) the schedule must have,
	// every one of them, for its violation to be this finding: a
	// look-alike with another cause (the same message after a restart
	// where the finding needs a relist) is reported. "none" means a
	// schedule with no fault (ordinary latency and lag only). Zero: any
	// schedule.
	Faults []string
	// On are resources (a watched resource's plural, "services"), each
	// of which a step of the schedule must be on (Step.Resource: a held,
	// delayed or broken watch, a fault on its writes' answers), for its
	// violation to be this finding: a stuck rollout from a Services
	// watch held is one finding, the same stuck rollout after ReplicaSet
	// events late is another. Zero: any.
	On []string
}

// FaultKinds are the names Known.Faults may use: Step.Kind's, and "none".
var FaultKinds = []string{"latency", "delay", "hold", "drop", "break", "relist", "restart", "restart-before-answer", "lose", "reset", "slow", "reject", "none"}

// Matches reports whether v is this known finding, its schedule aside
// (Known.Faults is not read: see Match).
func (k Known) Matches(v Violation) bool {
	return v.Oracle == k.Oracle && k.Message != "" && strings.Contains(v.Message, k.Message) &&
		strings.Contains(v.Subject, k.Subject)
}

// Match reports whether v, raised by an execution of sched, is this known
// finding: its oracle, message and subject (Matches), and the schedule's
// fault kinds (Faults).
func (k Known) Match(v Violation, sched Schedule) bool {
	if !k.Matches(v) {
		return false
	}
	kinds := map[string]bool{}
	for _, st := range sched.Steps {
		kinds[st.Kind()] = true
	}
	if !sched.HasFault() {
		kinds["none"] = true
	}
	for _, f := range k.Faults {
		if !kinds[f] {
			return false
		}
	}
	for _, r := range k.On {
		if !slices.ContainsFunc(sched.Steps, func(st Step) bool { return st.Resource == r }) {
			return false
		}
	}
	return true
}

// KnownOnly returns, when vs is not empty and every violation in it is a
// known finding of the scenario (Scenario.Known) raised by sched, the first
// Known each matched, once each; nil otherwise: the violations are then a
// finding.
func (e *Env) KnownOnly(vs []Violation, sched Schedule) []Known { return e.s.knownOnly(vs, sched) }

// knownOnly returns, when vs is not empty and every violation in it is a
// known finding of s raised by sched, the first Known each matched (in
// s.Known's order, once each); nil otherwise.
func (s Scenario) knownOnly(vs []Violation, sched Schedule) []Known {
	if len(vs) == 0 {
		return nil
	}
	var out []Known
	seen := map[int]bool{}
	for _, v := range vs {
		i := s.knownIndex(v, sched)
		if i < 0 {
			return nil
		}
		if !seen[i] {
			seen[i] = true
			out = append(out, s.Known[i])
		}
	}
	return out
}

func (s Scenario) knownIndex(v Violation, sched Schedule) int {
	for i, k := range s.Known {
		if k.Match(v, sched) {
			return i
		}
	}
	return -1
}

const knownFile = "known.log"

// KnownKept is how many executions of each known finding a fuzz worker
// keeps the files of (knownKept.keep), the first it runs into.
const KnownKept = 3

// knownKept counts what a fuzz worker kept of its known findings'
// executions (knownKept.keep).
type knownKept struct {
	byWhy  map[string]int  // executions kept per Known's Why
	inputs map[string]bool // inputs kept: one run again is not kept twice
}

// keep keeps an execution that had only the known findings ks, when
// this worker has kept fewer than KnownKept of one of them and not this
// input already: its input as a corpus entry, its trace and the
// controllers' log, in the findings directory, named
// known-<scenario>-<hash>. A known finding is matched by its oracle,
// message, subject and fault kinds, and another cause can still match
// them: the input lets a person
// replay it (stalefuzz replay judges it as a finding) and the trace lets
// them read which path it took. It returns the input's path, "" when none
// was written.
func (k *knownKept) keep(res *Result, scenario string, input []byte, ks []Known) string {
	if k.byWhy == nil {
		k.byWhy, k.inputs = map[string]int{}, map[string]bool{}
	}
	want := false
	for _, kn := range ks {
		want = want || k.byWhy[kn.Why] < KnownKept
	}
	if !want || k.inputs[string(input)] {
		return ""
	}
	k.inputs[string(input)] = true
	for _, kn := range ks {
		k.byWhy[kn.Why]++
	}
	dir := findingsDir()
	name, err := reserveFinding(dir, "known-"+findingName(scenario, input))
	if err != nil {
		return ""
	}
	if _, err := res.WriteTrace(dir, name); err != nil {
		return ""
	}
	_, _ = res.WriteLogs(dir, name)
	path, _, err := writeCorpusEntry(dir, name, input)
	if err != nil {
		return ""
	}
	return path
}

// logKnown appends an execution that had only known findings to known.log
// in the campaign's directory, one line per finding: "<why>\t<schedule>",
// and "\t<input>" when its files were kept (knownKept.keep).
func logKnown(sched Schedule, ks []Known, input string) {
	for _, k := range ks {
		line := k.Why + "\t" + sched.String()
		if input != "" {
			line += "\t" + input
		}
		appendLine(knownFile, line)
	}
}

// knownStatsLine matches the known-findings line of a worker's stats file
// (worded so that the executions line's patterns never match it).
var knownStatsLine = regexp.MustCompile(`: known findings only in (\d+) of them`)

func knownStats(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(": known findings only in %d of them (%s)", n, knownFile)
}

// writeKnown writes " <why> ×<n>;" for each known finding in byWhy, and,
// when they add up to more than the executions (an execution with two
// known findings counts under each), says so.
func writeKnown(w io.Writer, executions int, byWhy map[string]int) {
	sum := 0
	for _, why := range slices.Sorted(maps.Keys(byWhy)) {
		fmt.Fprintf(w, " %s ×%d;", why, byWhy[why])
		sum += byWhy[why]
	}
	if sum > executions {
		fmt.Fprintf(w, " (%d in all: an execution with more than one counts under each)", sum)
	}
}

// KnownInputs reads known.log in a campaign directory and returns, per
// Known's Why, the inputs of the executions whose files were kept
// (knownKept.keep), in the order they ran.
func KnownInputs(dir string) map[string][]string {
	b, err := os.ReadFile(filepath.Join(dir, knownFile))
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 && f[2] != "" {
			out[f[0]] = append(out[f[0]], f[2])
		}
	}
	return out
}

// KnownHits sums, over the workers' stats files in a campaign directory,
// the executions that had only known findings, and counts them per Known's
// Why from known.log.
func KnownHits(dir string) (executions int, byWhy map[string]int) {
	eachStats(dir, func(s string) {
		if m := knownStatsLine.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			executions += n
		}
	})
	b, err := os.ReadFile(filepath.Join(dir, knownFile))
	if err != nil {
		return executions, nil
	}
	byWhy = map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if why, _, ok := strings.Cut(line, "\t"); ok {
			byWhy[why]++
		}
	}
	return executions, byWhy
}
