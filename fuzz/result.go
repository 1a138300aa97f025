package fuzz

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/report"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Result is what one execution did and which oracles it violated.
type Result struct {
	Scenario  string
	Namespace string
	Schedule  Schedule
	Mark      time.Time
	Elapsed   time.Duration
	Settled   bool // lag over, then no writes and nothing held for the quiet period
	// SettledIdle is true when the run settled before the schedule's
	// windows had ended: they act on watch events only (delay, hold, drop),
	// nothing was held or delayed, no workload timer was due, and no client
	// wrote for the quiet period, so the rest of the windows could change
	// nothing.
	SettledIdle bool
	Converged   bool // the Convergence oracle's objects converged
	Restarts    []Restart
	// Diverged is why the workload went on without what it waited for
	// (Exec.Diverged: the first wait that gave up), empty when it ran as
	// written. Such a run's end state is judged only when the same waits
	// gave up in both no-fault reference runs of its knob settings (the
	// workflow as written: a wait that times out by design); otherwise
	// they ran another workflow, and it is shown, not judged.
	Diverged   string
	Trace      trace.Trace
	Violations []Violation
	// SelfViews counts the writes sent from a view older than their
	// writer's own last write (audit.SelfStale), by what they replaced.
	SelfViews SelfViewStats
	// selfViewWrites are those that replaced their writer's own values for
	// good, each with its kind (FalseAlarms.SelfViewKinds).
	selfViewWrites []selfViewWrite
	// Logs is what the controllers logged during the execution (Logs
	// says which lines, how bounded and how redacted).
	Logs Logs
	// Phases is where the execution's time went.
	Phases Phases
	// NotCurrent names the objects of Scenario.AwaitCurrent's kinds that
	// were still not kstatus Current when the settle budget ran out on a
	// run that was otherwise quiet (so it never settled); none when every
	// one was Current.
	NotCurrent []string
	// SweepErr says what of the execution's namespace was not removed
	// after it (the next execution's sweep tries again); nil when all of
	// it was. It never makes the execution a harness error.
	SweepErr error

	// final is the Differential kind's final state (Env.snapshot), taken
	// before the sweep.
	final    map[string]any
	finalErr error
	// counts are, per Scenario.Counts, the most live objects per owner
	// kind in this run (Count).
	counts []map[string]countPeak
	// ends are, per Scenario.EndStates, the objects of a settled run.
	ends []endObjects
	// endDiffs and countOver are the end-state and count violations as
	// values (learnedOracles), for triage.
	endDiffs  []endDiff
	countOver []countOver
	// endUnjudged are the end-state differences from the reference runs
	// of a run whose workflow, or whose references' workflow, diverged
	// (endUnjudgedWhy says whose): shown in the report, never violations.
	endUnjudged    []string
	endUnjudgedWhy string
	// gaveUp are every wait that gave up (Exec.Diverged), sorted; the
	// end state is judged when they are the no-fault reference runs'
	// (learned.gaveUp), and gaveUpAsReferences then says so.
	gaveUp             []string
	gaveUpAsReferences bool
	// storm is, for an unsettled run of a Storm scenario, how its writes
	// got nowhere once the faults were over (judged by Env.judgeStorm).
	storm string
	// direct are the workload's writes (Exec.Direct), for the oracles
	// judged after the execution.
	direct []directWrite
	// leaderElection is the scenario's (Scenario.LeaderElection), for
	// Report.
	leaderElection map[string]LeaderElection
}

// Phases is where one execution's time went, in order: Start (a namespace
// and the controllers, until their caches synced), Drive (the workload), Lag
// (until the schedule's windows and faults were over), Settle (until the
// quiet period held, or the settle budget ran out), Judge (the oracles),
// Stop (the controllers stopped) and Sweep (what the execution left in the
// apiserver removed).
type Phases struct {
	Start, Drive, Lag, Settle, Judge, Stop, Sweep time.Duration
}

// Add sums two breakdowns (for a mean over executions).
func (p Phases) Add(q Phases) Phases {
	return Phases{p.Start + q.Start, p.Drive + q.Drive, p.Lag + q.Lag, p.Settle + q.Settle, p.Judge + q.Judge, p.Stop + q.Stop, p.Sweep + q.Sweep}
}

// Div is p with every phase divided by n (a mean); p itself for n <= 0.
func (p Phases) Div(n int) Phases {
	if n <= 0 {
		return p
	}
	d := time.Duration(n)
	return Phases{p.Start / d, p.Drive / d, p.Lag / d, p.Settle / d, p.Judge / d, p.Stop / d, p.Sweep / d}
}

func (p Phases) String() string {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	return fmt.Sprintf("start %d ms, drive %d ms, lag %d ms, settle %d ms, judge %d ms, stop %d ms, sweep %d ms",
		ms(p.Start), ms(p.Drive), ms(p.Lag), ms(p.Settle), ms(p.Judge), ms(p.Stop), ms(p.Sweep))
}

// Violation is one oracle's verdict.
type Violation struct {
	Oracle string
	// Subject names the object the verdict is about ("rollouts.example.com
	// ns/r", "GitRepository ns/app"), when the oracle knows; a finding
	// groups repeated verdicts of one oracle on one subject.
	Subject string
	Message string
	// At is when the violation happened, when the oracle knows (a lost
	// update: the replacing write); zero otherwise.
	At time.Time
}

func (r *Result) violate(oracle, msg string) {
	r.Violations = append(r.Violations, Violation{Oracle: oracle, Message: msg})
}

func (r *Result) violateOn(oracle, subject, msg string) {
	r.Violations = append(r.Violations, Violation{Oracle: oracle, Subject: subject, Message: msg})
}

// Err is nil when no oracle was violated, else every violation, each naming
// the schedule, the object and the field.
func (r *Result) Err() error {
	var errs []error
	for _, v := range r.Violations {
		errs = append(errs, fmt.Errorf("schedule %s: [%s] %s", r.Schedule, v.Oracle, v.Message))
	}
	return errors.Join(errs...)
}

// Report is a finding as a person reads it: the schedule, the violations and
// a short timeline of lag windows, writes, 409s and held events.
func (r *Result) Report() string {
	var b strings.Builder
	what := "finding"
	if len(r.Violations) == 0 {
		what = "execution (no violation)"
	}
	fmt.Fprintf(&b, "stalefuzz %s in scenario %s (namespace %s, %.2fs)\n", what, r.Scenario, r.Namespace, r.Elapsed.Seconds())
	fmt.Fprintf(&b, "schedule: %s\n", r.Schedule)
	for _, st := range r.Schedule.Steps {
		fmt.Fprintf(&b, "  cause of %s: %s\n", st, st.Cause())
		if v := st.Versions(); v != "" {
			fmt.Fprintf(&b, "    which clusters: %s\n", v)
		}
		if d := st.AsDeployed(r.leaderElection[st.Client]); d != "" {
			fmt.Fprintf(&b, "    as deployed: %s\n", d)
		}
	}
	if len(r.NotCurrent) > 0 {
		fmt.Fprintf(&b, "never settled: quiet, but not yet kstatus Current when the settle budget ran out: %s\n", strings.Join(r.NotCurrent, "; "))
	}
	for _, g := range groupViolations(r.Violations) {
		fmt.Fprintf(&b, "violation [%s]: %s\n", g.first.Oracle, g.first.Message)
		if g.more > 0 {
			fmt.Fprintf(&b, "  ... and %d more like it ([%s] on %s; every one is in the picture and in Result.Violations)\n", g.more, g.first.Oracle, g.subject())
		}
	}
	switch {
	case r.Diverged != "" && r.gaveUpAsReferences:
		fmt.Fprintf(&b, "workload waits gave up as in both no-fault reference runs (%s): the workflow as written, its end state judged\n", strings.Join(r.gaveUp, "; "))
	case r.Diverged != "":
		fmt.Fprintf(&b, "workflow diverged: %s; the workload went on without it, so the end state was not judged\n", r.Diverged)
	}
	if len(r.endUnjudged) > 0 {
		fmt.Fprintf(&b, "end state not judged, as %s:\n", r.endUnjudgedWhy)
	}
	for _, m := range r.endUnjudged {
		fmt.Fprintf(&b, "  it differed from the reference runs': %s\n", m)
	}
	rep := r.Audit()
	r.reportCause(&b, rep)
	b.WriteString("timeline (t = seconds after the mark):\n")
	for _, l := range r.timeline(60, r.focus(rep), rep) {
		b.WriteString("  " + l + "\n")
	}
	r.reportLogs(&b)
	b.WriteString("writes (the blind-write audit of this execution):\n")
	var tbl strings.Builder
	_ = rep.WriteTable(&tbl)
	for _, l := range strings.Split(strings.TrimRight(tbl.String(), "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	for _, v := range r.Violations {
		if v.Oracle == "lost-update" && strings.Contains(v.Message, "acknowledged to the workload") {
			b.WriteString("  (the audit reads the proxy's trace, which the workload's own writes do not pass through: the lost-update oracle above judges those)\n")
			break
		}
	}
	return b.String()
}

// reportLogs writes the last few lines each client logged (all of them are
// in Logs and in the finding's .log file).
func (r *Result) reportLogs(b *strings.Builder) {
	clients := map[string]bool{}
	for _, l := range r.Logs.Lines {
		clients[l.Client] = true
	}
	if len(clients) == 0 {
		return
	}
	b.WriteString("controllers' log (the last lines of each client; all in the .log file):\n")
	for _, c := range slices.Sorted(maps.Keys(clients)) {
		for _, l := range r.Logs.Last(c, 3) {
			txt := l.Text
			if len(txt) > 200 {
				txt = txt[:200] + "..."
			}
			fmt.Fprintf(b, "  %+7.3f  %s: %s\n", l.At.Sub(r.Mark).Seconds(), c, txt)
		}
	}
}

// violationGroup is the first of the violations of one oracle on one
// subject, and how many more there were.
type violationGroup struct {
	first Violation
	more  int
}

func (g violationGroup) subject() string {
	if g.first.Subject == "" {
		return "the same words"
	}
	return g.first.Subject
}

// groupViolations groups vs by oracle and subject (by message when the
// subject is unknown), in order of first appearance.
func groupViolations(vs []Violation) []violationGroup {
	var out []violationGroup
	index := map[[2]string]int{}
	for _, v := range vs {
		k := [2]string{v.Oracle, v.Subject}
		if v.Subject == "" {
			k[1] = "\x00" + v.Message
		}
		if i, ok := index[k]; ok {
			out[i].more++
			continue
		}
		index[k] = len(out)
		out = append(out, violationGroup{first: v})
	}
	return out
}

// Audit classifies the execution's writes and flags the blind ones that
// replaced a change their writer had not seen (package audit).
func (r *Result) Audit() audit.Report {
	rep := audit.Of(r.Trace)
	rep.Start = r.Mark
	return rep
}

// Page is the execution as a picture (package report): the schedule as the
// title, its steps as bands, the violations, and the audit below.
func (r *Result) Page() report.Page {
	p := report.Page{
		Title: fmt.Sprintf("%s: %s", r.Scenario, r.Schedule),
		Notes: []string{fmt.Sprintf("namespace %s, %.2fs", r.Namespace, r.Elapsed.Seconds())},
		Mark:  r.Mark,
		Trace: r.Trace,
		Sections: []report.Section{{
			Title: "Writes: the blind-write audit",
			HTML:  r.Audit().HTML(),
		}},
	}
	for _, st := range r.Schedule.Steps {
		p.Notes = append(p.Notes, fmt.Sprintf("%s: %s", st, st.Cause()))
		p.Bands = append(p.Bands, report.Band{
			Client: st.Client, Start: r.Mark.Add(st.Start), End: r.Mark.Add(st.End()), Label: st.String(), Cause: st.Cause(),
		})
	}
	for _, rs := range r.Restarts {
		p.Bands = append(p.Bands, report.Band{
			Client: rs.Client, Start: rs.Stopped, End: rs.Ready, Label: "restart: stopped, then ready again",
			Cause: "a controller killed and started again (an OOM kill, an eviction, a rollout)",
		})
	}
	for _, v := range r.Violations {
		p.Violations = append(p.Violations, report.Violation{At: v.At, Oracle: v.Oracle, Message: v.Message})
	}
	return p
}

// Timeline lists, in time order, the lag windows, every write with its
// precondition and answer, and every event the lag touched; at most max
// lines, around the moment that matters (the first violation's, else the
// first write behind its writer's own that replaced that write's values,
// else the end), with the schedule's steps first.
func (r *Result) Timeline(most int) []string {
	rep := r.Audit()
	return r.timeline(most, r.focus(rep), rep)
}

// focus is the moment a finding's timeline is centered on: the first
// violation that says when it happened, else the first write behind its
// writer's own that replaced that write's values; zero for the end.
func (r *Result) focus(rep audit.Report) time.Time {
	var at time.Time
	for _, v := range r.Violations {
		if !v.At.IsZero() && (at.IsZero() || v.At.Before(at)) {
			at = v.At
		}
	}
	if !at.IsZero() {
		return at
	}
	for _, s := range rep.SelfStale {
		if len(s.Replaced) > 0 {
			return s.At
		}
	}
	return time.Time{}
}

// reportCause writes, when the execution has writes behind their
// writer's own that replaced that write's values, the first few as a
// likely cause: a controller acting on a cache older than its own last
// write is the commonest stale-cache bug, and the oracles' symptom (an
// object left behind, a count) is often far from it. Then the answers
// that arrived older than their client's view and were never followed by a
// newer version (audit.Overtaken.Lasting), as a possible cause: only a
// client that writes its answers into its cache (a write-back) is misled.
func (r *Result) reportCause(b *strings.Builder, rep audit.Report) {
	var cause []audit.SelfStale
	for _, s := range rep.SelfStale {
		if len(s.Replaced) > 0 {
			cause = append(cause, s)
		}
	}
	var lasting []audit.Overtaken
	for _, o := range rep.Overtaken {
		// Not a previous execution's objects, swept after the mark.
		if o.Lasting() && !o.At.Before(r.Mark) && (r.Namespace == "" || o.Namespace == "" || o.Namespace == r.Namespace) {
			lasting = append(lasting, o)
		}
	}
	if len(r.Violations) == 0 {
		return
	}
	if len(cause) > 0 {
		fmt.Fprintf(b, "a likely cause: %d writes sent from a view older than their writer's own last write replaced values of that write (the audit below has every one):\n", len(cause))
		for _, s := range cause[:min(3, len(cause))] {
			fmt.Fprintf(b, "  t%+.3fs %s\n", s.At.Sub(r.Mark).Seconds(), s)
		}
	}
	if len(lasting) > 0 {
		fmt.Fprintf(b, "a possible cause, where the client writes its writes' answers into its cache: %d answers arrived older than what the client had been shown, and nothing showed it the object again (the audit below has every one):\n", len(lasting))
		for _, o := range lasting[:min(3, len(lasting))] {
			fmt.Fprintf(b, "  t%+.3fs %s\n", o.At.Sub(r.Mark).Seconds(), o)
		}
	}
}

func (r *Result) timeline(most int, focus time.Time, rep audit.Report) []string {
	type line struct {
		at  time.Duration
		txt string
	}
	var steps, ls []line
	for _, st := range r.Schedule.Steps {
		steps = append(steps, line{st.Start, "lag    " + st.String()})
	}
	behind := map[string]audit.SelfStale{} // client|verb|object|start → the write
	for _, s := range rep.SelfStale {
		behind[s.Client+"|"+s.Verb+"|"+s.Object().String()+"|"+s.At.String()] = s
	}
	overtaken := map[string]audit.Overtaken{} // client|verb|object|start → the answer
	for _, o := range rep.Overtaken {
		overtaken[o.Client+"|"+o.Verb+"|"+o.Object().String()+"|"+o.Sent.String()] = o
	}
	for _, rs := range r.Restarts {
		lag := ""
		if rs.Lag > 0 {
			lag = fmt.Sprintf(", reconnected to an apiserver %.2fs behind", rs.Lag.Seconds())
		}
		ls = append(ls, line{rs.Stopped.Sub(r.Mark), fmt.Sprintf("restart %-17s stopped %.3fs after the write that fired it, ready %.3fs later%s",
			rs.Client, rs.Stopped.Sub(rs.Fired).Seconds(), rs.Ready.Sub(rs.Stopped).Seconds(), lag)})
	}
	for _, q := range r.Trace.Requests {
		if q.FaultKind != "" && !q.IsWrite() {
			ls = append(ls, line{q.Start.Sub(r.Mark), fmt.Sprintf("fault  %-18s %-6s %-34s %s", q.Client, q.Verb, q.Resource, q.Fault)})
			continue
		}
		if !q.IsWrite() {
			continue
		}
		occ := "blind"
		if q.SentRV != "" {
			occ = "rv=" + q.SentRV
		}
		what := q.Resource + "/" + q.Name
		if q.Subresource != "" {
			what += "/" + q.Subresource
		}
		txt := fmt.Sprintf("write  %-18s %-6s %-34s %-9s -> %d", q.Client, q.Verb, what, occ, q.Code)
		if q.Abandoned {
			txt = fmt.Sprintf("write  %-18s %-6s %-34s %-9s -> abandoned by its client (may have been applied)", q.Client, q.Verb, what, occ)
		}
		if q.ReturnedRV != "" {
			txt += " rv=" + q.ReturnedRV
		}
		for _, k := range slices.Sorted(maps.Keys(q.Fields)) {
			v := q.Fields[k]
			if len(v) > 60 {
				v = v[:57] + "..."
			}
			txt += fmt.Sprintf(" %s=%s", k, v)
		}
		if q.Fault != "" {
			txt += " [" + q.Fault + "]"
		}
		if s, ok := behind[q.Client+"|"+q.Verb+"|"+q.Object().String()+"|"+q.Start.String()]; ok {
			view := "none"
			if s.View != "" {
				view = "rv " + s.View
			}
			txt += fmt.Sprintf(" [view %s, behind its own write at rv %s", view, s.Own)
			if len(s.Replaced) > 0 {
				txt += fmt.Sprintf(": replaced %d of its values", len(s.Replaced))
			}
			txt += "]"
		}
		if o, ok := overtaken[q.Client+"|"+q.Verb+"|"+q.Object().String()+"|"+q.Start.String()]; ok {
			txt += fmt.Sprintf(" [answered at t%+.3fs, after rv %s had been shown", o.At.Sub(r.Mark).Seconds(), o.View)
			if o.Lasting() {
				txt += "; never shown again"
			}
			txt += "]"
		}
		ls = append(ls, line{q.Start.Sub(r.Mark), txt})
	}
	for _, ev := range r.Trace.Events {
		if ev.Rule < 0 {
			continue
		}
		fate := string(ev.Fate)
		if ev.Fate == trace.Released {
			fate = fmt.Sprintf("held %.2fs", ev.Released.Sub(ev.Arrived).Seconds())
		}
		ls = append(ls, line{ev.Arrived.Sub(r.Mark), fmt.Sprintf("event  %-18s %-8s %s/%s rv=%s: %s", ev.Client, ev.Type, ev.Resource, ev.Name, ev.ResourceVersion, fate)})
	}
	slices.SortStableFunc(ls, func(a, b line) int { return int(a.at - b.at) })
	// The window of max lines (less the steps) around the focus: two
	// thirds before it, a third from it on; the end when there is none.
	room := max(10, most-len(steps))
	from, to := 0, len(ls)
	if room < len(ls) {
		center := len(ls)
		if !focus.IsZero() {
			at := focus.Sub(r.Mark)
			center = sort.Search(len(ls), func(i int) bool { return ls[i].at >= at })
		}
		from = min(len(ls)-room, max(0, center-room*2/3))
		to = from + room
	}
	out := make([]string, 0, most+2)
	for _, l := range steps {
		out = append(out, fmt.Sprintf("%+7.3f  %s", l.at.Seconds(), l.txt))
	}
	if from > 0 {
		out = append(out, fmt.Sprintf("... %d earlier (see the trace)", from))
	}
	for _, l := range ls[from:to] {
		out = append(out, fmt.Sprintf("%+7.3f  %s", l.at.Seconds(), l.txt))
	}
	if to < len(ls) {
		out = append(out, fmt.Sprintf("... %d more (see the trace)", len(ls)-to))
	}
	return out
}

// WriteReport writes the execution's picture (Page) as dir/name.html
// (dir created if needed) and returns the file's path.
func (r *Result) WriteReport(dir, name string) (string, error) {
	return writeFindingFile(dir, name+".html", "report", func(w io.Writer) error { return report.Write(w, r.Page()) })
}

// WriteTrace writes the execution's trace as JSONL into dir (created if
// needed) and returns the file's path.
func (r *Result) WriteTrace(dir, name string) (string, error) {
	return writeFindingFile(dir, name+".jsonl", "trace", r.Trace.WriteJSONL)
}

// WriteLogs writes the controllers' log (Logs, already redacted) as
// dir/name.log (dir created if needed) and returns the file's path.
func (r *Result) WriteLogs(dir, name string) (string, error) {
	return writeFindingFile(dir, name+".log", "controllers' log", func(w io.Writer) error { return r.Logs.WriteTo(w, r.Mark) })
}

// writeFindingFile creates dir (if needed, 0700) and dir/file (0600: a
// trace holds what the controllers wrote), the what of a finding, and fills
// it with write; it returns the file's path.
func writeFindingFile(dir, file, what string, write func(io.Writer) error) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("unable to create findings directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, file)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", fmt.Errorf("unable to create %s file: %w", what, err)
	}
	if err := f.Chmod(0o600); err != nil { // one written before with another mode
		f.Close()
		return "", fmt.Errorf("unable to make %s %s private: %w", what, path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return "", fmt.Errorf("unable to write %s %s: %w", what, path, err)
	}
	return path, f.Close()
}
