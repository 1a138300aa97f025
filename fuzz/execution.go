package fuzz

// One execution, in the order it happens: Env.Run (attempts), run (the
// namespace, the counters, the start, the mark and the schedule's rules,
// the workload, the restarts the schedule asks for, settling, the
// oracles, then stopping everything the execution started and sweeping
// its namespace), and what each step calls that belongs to no other
// concept. The Env's own life (its control plane, proxy, warm-up) is in
// engine.go; what an execution gives a scenario (Exec) in exec.go; the
// oracles in oracle.go and the files they name.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Run executes the scenario once under sched: a fresh namespace, the
// controllers started, the mark set with the lag windows, the workload driven,
// the lag let run out, the run settled, the oracles checked, and everything
// stopped. A non-nil error is a *HarnessError; violations are in the Result.
func (e *Env) Run(ctx context.Context, sched Schedule, opts ...RunOption) (*Result, error) {
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	try := func() (*Result, error) {
		res, err := e.run(ctx, sched, o)
		stormed := false
		if h, ok := errors.AsType[*HarnessError](err); res != nil && (err == nil || ok && h.Unsettled) {
			// A storm is why the run never settled: judged, not retried.
			if stormed = e.judgeStorm(ctx, res); stormed {
				err = nil
			}
		}
		if d := e.s.Differential; err == nil && d != nil && !stormed {
			if !res.Settled {
				// Its final state is not final: a slow run, not a finding.
				return res, &HarnessError{Err: fmt.Errorf("the run never settled, so its final %s state cannot be compared with the reference run's", d.GVK.Kind), Unsettled: true}
			}
			e.differential(ctx, res)
		}
		if err == nil && (len(e.s.Counts) > 0 || len(e.s.EndStates) > 0 || e.s.LostUpdatesAnyField) {
			e.learnedOracles(ctx, res)
		}
		if err == nil {
			e.judgeSelfViews(res)
		}
		return res, err
	}
	res, err := try()
	for attempt := 2; err != nil && attempt <= o.attempts && ctx.Err() == nil; attempt++ {
		res, err = try()
	}
	if err != nil {
		var h *HarnessError
		if !errors.As(err, &h) {
			err = &HarnessError{Err: err}
		}
		return res, err
	}
	return res, nil
}

// RunUntil runs sched up to tries times (each an Env.Run with opts) and
// returns the first result done accepts, or else the last, and how many
// runs it took: the regression row of a finding that shows in most runs,
// not all (state its N/20 beside it). A harness error ends it.
func (e *Env) RunUntil(ctx context.Context, sched Schedule, tries int, done func(*Result) bool, opts ...RunOption) (res *Result, runs int, err error) {
	for runs < max(tries, 1) {
		runs++
		if res, err = e.Run(ctx, sched, opts...); err != nil || done(res) {
			break
		}
	}
	return res, runs, err
}

// RunOption changes one Env.Run.
type RunOption func(*runOptions)

type runOptions struct {
	within   time.Duration
	attempts int
}

// Retries runs an execution that could not be judged (a harness error: a
// controller slower than its start budget on a loaded machine, say) again,
// up to attempts executions in all; a harness error is never a finding. The
// Result and error are the last attempt's.
func Retries(attempts int) RunOption { return func(o *runOptions) { o.attempts = attempts } }

// Within lets one execution take up to d in all instead of Budget, its
// scenario's checks included: for a spec that must watch a controller for
// longer than go test -fuzz allows one input (slow retry backoffs). Settling
// keeps its own budget; a check may wait for the rest. Never used while
// fuzzing.
func Within(d time.Duration) RunOption { return func(o *runOptions) { o.within = d } }

// lagNeed is how long after the mark the schedule's lag may last: its
// windows and delays, and each fault's window with what it sets off.
func (e *Env) lagNeed(sched Schedule) time.Duration {
	need := sched.LagEnd()
	for _, st := range sched.Steps {
		if st.IsFault() {
			need = max(need, st.End()+e.s.Bounds.orDefault().faultAllowance(Realistic))
		}
	}
	return need
}

// StartSlack is how many times StartBudget and RestartBudget a start and a
// restart may take outside a go test -fuzz worker, where no 10 s limit per
// input applies.
const StartSlack = 10

// SettleSlack is how many times SettleBudget settling may take outside a
// go test -fuzz worker, while the controllers are still making progress:
// on a loaded machine a healthy controller's last writes, or a retrying
// one's backed-off retries, come later than on a quiet one. A run whose
// controllers are retrying without progress (409 after 409, patches that
// change nothing) when SettleBudget runs out is judged then, as in a
// worker: the slack buys a slow machine time, never a stuck run.
const SettleSlack = 5

// settleBudget is the settle budget (SettleBudget, relaxed while warming
// up), and how long it may grow to while the controllers make progress.
func (e *Env) settleBudget() (budget, extended time.Duration) {
	budget = SettleBudget * e.slack
	return budget, budget * max(1, e.settleSlack)
}

// extraBudget is what the start and the schedule's restarts may take beyond
// their budgets (startSlack), and settling beyond its budget
// (settleSlack), added to the execution's budget.
func (e *Env) extraBudget(sched Schedule) time.Duration {
	settle, extended := e.settleBudget()
	extra := extended - settle
	if e.startSlack <= 1 {
		return extra
	}
	start := StartBudget
	for _, st := range sched.Steps {
		if st.IsRestart() {
			start += RestartBudget
		}
	}
	return extra + start*(e.startSlack-1)*e.slack
}

func (e *Env) run(ctx context.Context, sched Schedule, o runOptions) (res *Result, retErr error) {
	start := time.Now()
	budget := e.s.budget() * e.slack
	if o.within > 0 {
		budget = o.within
	}
	budget += e.extraBudget(sched)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	ns := fmt.Sprintf("%s-%d-%d", strings.ToLower(e.s.Name), os.Getpid(), execSeq.Add(1))
	if err := e.direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, fmt.Errorf("unable to create namespace %q: %w", ns, err)
	}
	if err := e.proxy.SetRules(time.Now()); err != nil {
		return nil, err
	}
	e.proxy.Trace().Reset()
	// Under the control plane's directory, so that even a killed process
	// leaves no execution directory behind.
	dir, err := os.MkdirTemp(e.cp.Dir(), "exec-")
	if err != nil {
		return nil, fmt.Errorf("unable to create execution directory: %w", err)
	}

	xctx, xcancel := context.WithCancel(ctx)
	x := &Exec{Namespace: ns, Schedule: sched, env: e, dir: dir, ctx: xctx}
	x.Direct = recordingClient(e.direct, e.s.LostUpdates, e.s.LostUpdatesAnyField, x.wroteDirect)
	res = &Result{Scenario: e.s.Name, Namespace: ns, Schedule: sched, leaderElection: e.s.LeaderElection}
	defer func() {
		xcancel()
		stopping := time.Now()
		if err := x.stop(StopBudget * e.slack); err != nil {
			retErr = errors.Join(retErr, harness("stopping namespace %s: %w", ns, err))
		}
		res.Phases.Stop = time.Since(stopping)
		res.Logs = x.logs.logs() // the controllers are gone: their last lines are in
		if err := e.proxy.SetRules(time.Now()); err != nil {
			retErr = errors.Join(retErr, err)
		}
		// What the execution left in the apiserver goes, its controllers
		// stopped; a sweep that does not finish is finished by the next.
		sweeping := time.Now()
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), SweepBudget*e.slack)
		res.SweepErr = e.sweep.sweep(sctx, ns)
		scancel()
		res.Phases.Sweep = time.Since(sweeping)
		res.Elapsed = time.Since(start)
	}()

	counters, err := e.startCounts(xctx, x)
	if err != nil {
		return res, harness("%w", err)
	}
	// The controllers may take StartBudget to start, and what of the lag
	// budget this schedule leaves unused: a loaded machine's slow start is
	// then no harness error, and the execution still fits Budget.
	need := e.lagNeed(sched)
	sctx, scancel := context.WithTimeout(xctx, (StartBudget*max(1, e.startSlack)+max(0, lagBudgetOf(e.s.budget())-need))*e.slack)
	err = e.s.Start(sctx, x)
	scancel()
	if err != nil {
		return res, harness("start controllers in %s: %w", ns, err)
	}
	x.mark = time.Now()
	res.Mark = x.mark
	res.Phases.Start = x.mark.Sub(start)
	rules, restartOf := e.rules(sched, ns)
	if err := e.proxy.SetRules(x.mark, rules...); err != nil {
		return res, harness("set rules: %w", err)
	}
	if len(restartOf) > 0 {
		x.Go("restarts", func(ctx context.Context) error { return e.restarts(ctx, x, restartOf) })
	}
	dctx, dcancel := context.WithTimeout(xctx, DriveBudget*e.slack)
	err = e.s.Drive(dctx, x)
	dcancel()
	if err != nil {
		return res, harness("drive workload in %s: %w", ns, err)
	}
	driven := time.Now()
	res.Phases.Drive = driven.Sub(x.mark)

	lagEnd := x.mark.Add(sched.LagEnd())
	deadline := x.mark.Add(need)
	var lagOver time.Time
	// Quiet counts from the end of the workload too: a slow workload write
	// must not count as quiet time.
	var byProbe bool
	res.Settled, res.SettledIdle, byProbe, lagOver = e.settle(ctx, x, driven, maxTime(lagEnd, driven), deadline, true)
	if res.Settled && byProbe && !e.convergedNow(ctx, x) {
		// A probe cannot see an event its client has read but not yet
		// queued (a loaded machine can take longer than ProbedQuiet to): a
		// run whose end state is wrong settles only by the full quiet
		// period, which the scenario makes longer than any retry.
		res.Settled, res.SettledIdle, _, _ = e.settle(ctx, x, driven, maxTime(lagEnd, driven), deadline, false)
	}
	settled := time.Now()
	res.Phases.Lag = max(0, lagOver.Sub(driven))
	res.Phases.Settle = settled.Sub(maxTime(lagOver, driven))
	x.settled, x.lagOver, x.settleEnd = res.Settled, lagOver, settled
	res.NotCurrent = x.notCurrent
	if e.s.Storm && !res.Settled {
		res.storm = storm(e.proxy.Trace().Since(trace.Cursor{}), x.mark, lagOver, settled, e.s.quiet())
	}
	x.mu.Lock()
	res.Restarts = slices.Clone(x.restarts)
	if len(x.diverged) > 0 {
		res.Diverged = x.diverged[0]
		res.gaveUp = slices.Sorted(slices.Values(x.diverged))
	}
	x.mu.Unlock()
	if err := x.err(); err != nil {
		return res, harness("%w", err)
	}
	if ctx.Err() != nil {
		return res, harness("execution in %s overran its %v budget", ns, budget)
	}
	res.Trace = e.proxy.Trace().Since(trace.Cursor{})
	if r := relayFailure(res.Trace); r != nil {
		return res, harness("the proxy could not relay %s's %s at t+%.2fs and answered 502 itself (the apiserver may have applied it): %s", r.Client, describeRequest(*r), r.Start.Sub(x.mark).Seconds(), r.RelayError)
	}
	for _, k := range counters {
		res.counts = append(res.counts, k.peaks())
	}
	if err := e.check(ctx, x, res); err != nil {
		return res, err
	}
	if d := e.s.Differential; d != nil && res.Settled {
		// Taken now: the namespace is swept when the execution ends.
		res.final, res.finalErr = e.snapshot(ctx, ns, d)
	}
	if res.Settled {
		for _, es := range e.s.EndStates {
			objs, err := e.endSnapshot(ctx, ns, es.GVK, es.Ignore)
			if err != nil {
				return res, harness("%w", err)
			}
			res.ends = append(res.ends, objs)
		}
	}
	res.Phases.Judge = time.Since(settled)
	if ctx.Err() != nil {
		return res, harness("execution in %s overran its %v budget while checking", ns, budget)
	}
	return res, nil
}

// rules are the proxy rules of sched's steps in namespace ns, and which
// rule fires each restart step (rule index → step index). Ordinary latency
// (Step.IsLatency) comes last, so that a fault or a targeted lag on the
// same events decides them (the first rule that matches an event does), and
// acts on the resources of Scenario.Scopes where they live too.
func (e *Env) rules(sched Schedule, ns string) ([]proxy.Rule, map[int]int) {
	var rules, latency []proxy.Rule
	restartOf := map[int]int{}
	for i, st := range sched.Steps {
		if st.IsLatency() {
			latency = append(latency, st.Rules(ns)...)
			for _, res := range slices.Sorted(maps.Keys(e.s.Scopes)) {
				for _, r := range st.Rules(e.s.Scopes[res]) {
					r.Resource = res
					latency = append(latency, r)
				}
			}
			continue
		}
		if st.IsRestart() {
			restartOf[len(rules)] = i
		}
		rules = append(rules, st.Rules(e.s.namespaceOf(st.Resource, ns))...)
	}
	return append(rules, latency...), restartOf
}

// relayFailure returns the first request in tr that the proxy could not
// relay while its client waited (trace.Request.RelayError): its client got
// a 502 that no apiserver gave, which no fault asked for, so the execution
// cannot be judged; nil when there is none.
func relayFailure(tr trace.Trace) *trace.Request {
	for i := range tr.Requests {
		if tr.Requests[i].RelayError != "" {
			return &tr.Requests[i]
		}
	}
	return nil
}

// describeRequest names a request as a person reads it: "create jobs
// ns/name" or "patch scaledjobs/status ns/name".
func describeRequest(r trace.Request) string {
	res := r.Resource
	if res == "" {
		res = r.Path
	}
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	obj := r.Name
	switch {
	case r.Namespace != "" && r.Name != "":
		obj = r.Namespace + "/" + r.Name
	case r.Namespace != "":
		obj = "in " + r.Namespace
	}
	return strings.TrimSpace(r.Verb + " " + res + " " + obj)
}

// restarts restarts a client whenever one of its restart steps' Freeze or
// Cut rules fires (the proxy has then frozen it right after, or instead of
// answering, the write), within RestartBudget each. With a Lag, the new
// instance reconnects to a lagging apiserver: its lists are served Lag in
// the past and its events come Lag late, until it has synced.
func (e *Env) restarts(ctx context.Context, x *Exec, restartOf map[int]int) error {
	var cur trace.Cursor
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for len(restartOf) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var tr trace.Trace
		tr, cur = e.proxy.Trace().Next(cur)
		for _, r := range tr.Requests {
			if r.Rule == nil || (r.FaultKind != trace.FaultFreeze && r.FaultKind != trace.FaultCut) {
				continue
			}
			i, ok := restartOf[*r.Rule]
			if !ok {
				continue
			}
			delete(restartOf, *r.Rule)
			rv := r.ReturnedRV
			if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
				// A delete answered with a Status carries no
				// resourceVersion: an apiserver that has not seen the
				// write has seen at most what the proxy had seen when it
				// was sent.
				rv = newestBefore(e.proxy.Trace().Since(trace.Cursor{}), r.Start)
			}
			if err := e.restartStep(ctx, x, i, r.Start.Add(r.Latency), rv); err != nil {
				return err
			}
		}
	}
	return nil
}

// newestBefore is one more than the newest resourceVersion in tr (a write's
// answer, a watch event) known before t: restartStep lists from one below
// the resourceVersion it is given. "" when there is none.
func newestBefore(tr trace.Trace, t time.Time) string {
	var newest uint64
	see := func(rv string, at time.Time) {
		if n, err := strconv.ParseUint(rv, 10, 64); err == nil && at.Before(t) {
			newest = max(newest, n)
		}
	}
	for _, r := range tr.Requests {
		see(r.ReturnedRV, r.Start.Add(r.Latency))
	}
	for _, ev := range tr.Events {
		see(ev.ResourceVersion, ev.Arrived)
	}
	if newest == 0 {
		return ""
	}
	return strconv.FormatUint(newest+1, 10)
}

// restartStep restarts the client of step, whose write was answered (or
// withheld) at fired with resourceVersion rv. With a Lag, the new instance
// reconnects to an apiserver that has not yet seen that write: its lists are
// served at rv-1, and its events come Lag late, while it syncs.
func (e *Env) restartStep(ctx context.Context, x *Exec, step int, fired time.Time, rv string) error {
	st := x.Schedule.Steps[step]
	x.mu.Lock()
	x.restarting++
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.restarting--
		x.mu.Unlock()
	}()
	rctx, cancel := context.WithTimeout(ctx, RestartBudget*max(1, e.startSlack)*e.slack)
	defer cancel()
	var addErr error
	var keep func() error // ends keepLagging once the new instance has synced
	stopped, err := x.restart(rctx, st.Client, func() {
		if st.Lag <= 0 {
			return
		}
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil || n < 2 {
			addErr = fmt.Errorf("the write that fired it returned resourceVersion %q: cannot list from before it", rv)
			return
		}
		now := time.Since(x.mark)
		rv := strconv.FormatUint(n-1, 10)
		rules := []proxy.Rule{
			{Client: st.Client, Namespace: x.Namespace, Action: proxy.Rewind, ResourceVersion: rv, From: now, To: now + RestartBudget},
			{Client: st.Client, Namespace: x.Namespace, Action: proxy.Delay, Delay: st.Lag, From: now, To: now + RestartBudget},
		}
		// The lagging apiserver is behind on the objects outside the
		// namespace too.
		for _, sc := range e.sweep.scopes {
			rules = append(rules,
				proxy.Rule{Client: st.Client, Resource: sc.gvr.Resource, Namespace: sc.namespace, Action: proxy.Rewind, ResourceVersion: rv, From: now, To: now + RestartBudget},
				proxy.Rule{Client: st.Client, Resource: sc.gvr.Resource, Namespace: sc.namespace, Action: proxy.Delay, Delay: st.Lag, From: now, To: now + RestartBudget})
		}
		if addErr = e.proxy.AddRules(rules...); addErr == nil {
			keep = e.keepLagging(x, rules, now+RestartBudget)
		}
	})
	if keep != nil {
		if kerr := keep(); err == nil {
			err = kerr
		}
	}
	if err == nil {
		err = addErr
	}
	if err != nil {
		return fmt.Errorf("restart step %s: %w", st, err)
	}
	ready := time.Now()
	x.mu.Lock()
	x.restarts = append(x.restarts, Restart{Client: st.Client, Step: step, Fired: fired, Stopped: stopped, Ready: ready, Lag: st.Lag})
	if x.restarted == nil {
		x.restarted = map[int]bool{}
	}
	x.restarted[step] = true
	x.lagUntil = maxTime(x.lagUntil, ready.Add(st.Lag))
	x.mu.Unlock()
	return nil
}

// keepLagging keeps a restart's lagging apiserver (rules, in force until
// end after the mark) behind until the returned function is called, once the
// new instance has synced: while it is not, the rules are added again, a
// quarter of RestartBudget at a time, before they end. A restart within
// RestartBudget (always, while fuzzing: it is the restart's budget there)
// never needs it, so a schedule means what it meant; a slower one (on a
// loaded machine, whose slack lets a test's or a replay's restart take
// longer) would otherwise list from an apiserver that had caught up, and
// the restart would not be the one the schedule asks for. The trace records
// each addition with its window.
func (e *Env) keepLagging(x *Exec, rules []proxy.Rule, end time.Duration) (stop func() error) {
	const step = RestartBudget / 4
	done, finished := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				finished <- nil
				return
			case <-tick.C:
			}
			now := time.Since(x.mark)
			if now < end-step/2 {
				continue
			}
			more := slices.Clone(rules)
			for i := range more {
				more[i].From, more[i].To = now, end+step
			}
			if err := e.proxy.AddRules(more...); err != nil {
				finished <- fmt.Errorf("keep the lagging apiserver behind past t+%v: %w", end, err)
				return
			}
			end += step
		}
	}()
	return func() error {
		close(done)
		return <-finished
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// settle waits until the lag is over and then until, for the quiet period, no
// client wrote and no event was held; false if that did not happen by
// deadline. It also returns when the lag was first over (zero if never). The
// lag is over once the schedule's windows have ended, no restart is under way
// or lagging, and every watch a fault ended (a Break, a 410) has been opened
// again: a reflector waiting for its relist backoff is not settled, only
// quiet.
//
// A schedule of watch-event windows only (delay, hold, drop) is over sooner:
// once nothing is held or delayed, no workload timer is due and the quiet
// period has passed since the workload, the last write and the last release.
// Such a window acts only on events, and an event comes only from a write,
// so the rest of the window could change nothing that settling would not
// already have missed.
//
// Quiet, a run with Scenario.AwaitCurrent kinds also waits until each of
// their objects is kstatus Current or Failed, within the same deadline;
// one still not Current then leaves the run unsettled (Exec.notCurrent
// names them).
//
// With probes false, the idle probes are not asked: only the full quiet
// period counts. byProbe says the probes' word shortened the wait.
func (e *Env) settle(ctx context.Context, x *Exec, driven, lagEnd, deadline time.Time, probes bool) (settled, idle, byProbe bool, lagOver time.Time) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	eventsOnly := true
	for _, st := range x.Schedule.Steps {
		eventsOnly = eventsOnly && !st.IsFault()
	}
	// Each tick reads only what the trace recorded since the last one, and
	// keeps the end of the newest write and which watches are down.
	var seen, sent trace.Cursor
	flight := newInFlight()
	direct := 0 // Direct's writes read so far
	lastWrite := driven
	var busy time.Time          // last seen with an event held or delayed
	watches := watchStates{}    // client|resource → when a fault ended its watch, when it was open again
	var asked time.Time         // when the idle probes were last asked
	idleSeen := false           // and what they said
	failing := map[string]int{} // client → its writes that failed since its last success
	var checked time.Time       // when the AwaitCurrent objects were last read
	var waiting []string        // and which of them were not Current then
	settle, extended := e.settleBudget()
	var progressSeen time.Time // when progressing was last asked, past the budget
	for {
		now := time.Now()
		var newer trace.Trace
		newer, seen = e.proxy.Trace().Next(seen)
		var released []trace.Event
		released, sent = e.proxy.Trace().NextReleased(sent)
		for i := range released {
			flight.released(&released[i])
		}
		for _, r := range newer.Requests {
			flight.request(&r)
			if end := r.Answered(); r.IsWrite() && r.Code != 0 && end.After(lastWrite) {
				lastWrite = end
			}
			if r.IsWrite() && !r.DryRun && r.Code != 0 {
				if r.Code/100 == 2 {
					failing[r.Client] = 0
				} else {
					failing[r.Client]++
				}
			}
			if r.Verb != "watch" {
				continue
			}
			switch {
			case r.FaultKind == trace.FaultExpire:
				watches.ended(r.Client+"|"+r.Resource, r.Start)
			case r.Code == 200 && r.FaultKind == "":
				watches.opened(r.Client+"|"+r.Resource, r.Start, r.Start.Add(r.Latency))
			}
		}
		for _, ev := range newer.Events {
			switch ev.Fate {
			case trace.Broken:
				watches.ended(ev.Client+"|"+ev.Resource, ev.Arrived)
			case trace.Dropped:
				flight.released(&ev)
			}
		}
		down, resumed := watches.down()
		x.mu.Lock()
		for _, w := range x.directWrites[direct:] {
			flight.wrote(w.obj, w.rv)
		}
		direct = len(x.directWrites)
		x.mu.Unlock()
		inFlight := flight.count()
		pending := e.proxy.Pending()
		if pending > 0 {
			busy = now
		}
		x.mu.Lock()
		over := !now.Before(maxTime(lagEnd, x.lagUntil)) && x.restarting == 0
		for i, st := range x.Schedule.Steps {
			if st.IsRestart() && !x.restarted[i] && now.Before(x.mark.Add(st.End())) {
				over = false // its write may still come
			}
		}
		// A restarted controller, or one whose broken watch is open again,
		// gets the whole quiet period to act from that moment (and from
		// when its lagging apiserver caught up).
		// A workload timer (Exec.After) is workload too: its writes go
		// around the proxy, so the quiet counts from its end, and no run
		// settles while one is due.
		timerDone, timersDue := x.timerDone, x.timersDue > 0
		quietSince := maxTime(maxTime(maxTime(maxTime(maxTime(lastWrite, lagEnd), x.lagUntil), resumed), busy), timerDone)
		x.mu.Unlock()
		if over && down == 0 && lagOver.IsZero() {
			lagOver = now
		}
		// Quiet long enough: the scenario's Quiet, or, when every running
		// client has a probe, their saying at a look ProbedQuiet or more
		// after the last write that no client has work left.
		// The probes are asked from the start, every probeInterval, so
		// that a retry and the reconcile it causes (a backoff apart) are
		// seen apart.
		probed := probes && x.probed()
		if probed && now.Sub(asked) >= probeInterval {
			asked, idleSeen = now, x.idle(ctx)
		}
		need := max(e.s.quiet(), retryBackoff(failing))
		quietFor := func(since time.Time) (quiet, byProbe bool) {
			if now.Sub(since) >= need {
				return true, false
			}
			return probed && idleSeen && asked.Sub(since) >= ProbedQuiet, true
		}
		quiet, quietIdle, quietProbe := false, false, false
		if q, p := quietFor(quietSince); over && !timersDue && down == 0 && pending == 0 && inFlight == 0 && q {
			quiet, quietProbe = true, p
		} else if q, p := quietFor(maxTime(maxTime(lastWrite, busy), timerDone)); !over && eventsOnly && !timersDue && down == 0 && pending == 0 && inFlight == 0 && q {
			quiet, quietIdle, quietProbe = true, true, p
		}
		// Quiet, but an object of Scenario.AwaitCurrent's kinds not done:
		// its controller may be waiting for a retry the trace cannot show.
		if quiet && len(e.s.AwaitCurrent) > 0 && now.Sub(checked) >= currentInterval {
			checked, waiting = now, e.notCurrent(ctx, x.Namespace)
		}
		// The settle budget counts from the end of the workload's timers
		// too: a no-fault run whose last step comes at t+1.5 s gets as long
		// to settle after it as a faulted run gets after its lag. While a
		// timer is due, only the execution's Budget (ctx) ends the wait.
		// Past the budget, outside a fuzz worker, the wait goes on while
		// the controllers still make progress (settleSlack).
		outOfBudget := false
		if from := maxTime(deadline, timerDone); !timersDue && now.After(from.Add(settle)) {
			switch {
			case !now.Before(from.Add(extended)):
				outOfBudget = true
			case now.Sub(progressSeen) >= progressInterval:
				progressSeen = now
				outOfBudget = !e.progressing(x, lagOver, now)
			}
		}
		if quiet && len(waiting) == 0 {
			if quietIdle {
				return true, true, quietProbe, now
			}
			return true, false, quietProbe, lagOver
		}
		if outOfBudget {
			// Quiet with objects still not Current is not settled: their
			// controller may still be backing off (kube-controller-manager's
			// StatefulSet controller waited 10 s in a false-alarm run).
			if quiet {
				x.notCurrent = waiting
			}
			return false, false, false, lagOver
		}
		select {
		case <-ctx.Done():
			return false, false, false, lagOver
		case <-tick.C:
		}
	}
}

// progressInterval is how often, past the settle budget, settle asks
// whether the controllers still make progress.
const progressInterval = 100 * time.Millisecond

// progressing says whether a run not settled within its settle budget may
// still settle: the lag is not over yet (a watch still to reopen, a restart
// under way, a lagging apiserver catching up), or the writes since it was
// over have not stalled (writeOutcomes.stalled), as a healthy controller's
// do on a loaded machine. A run whose writes have stalled is judged at the
// budget, however much slack it has.
func (e *Env) progressing(x *Exec, lagOver, now time.Time) bool {
	if lagOver.IsZero() {
		return true
	}
	return !writesSince(e.proxy.Trace().Since(trace.Cursor{}), lagOver).stalled(lagOver, now, e.s.quiet())
}

// watchStates follow, per client and resource, whether a fault (a Break,
// an Expire) has ended its watch and whether it was opened again since, by
// the times the trace gives, whatever order a poll reads them in: a broken
// event and the re-watch after it often arrive in one poll.
type watchStates map[string]*watchState

type watchState struct {
	ended        time.Time // the latest fault that ended the watch
	opened, open time.Time // the latest clean watch: when it was asked for and answered
}

func (w watchStates) get(key string) *watchState {
	st := w[key]
	if st == nil {
		st = &watchState{}
		w[key] = st
	}
	return st
}

func (w watchStates) ended(key string, at time.Time) {
	st := w.get(key)
	st.ended = maxTime(st.ended, at)
}

func (w watchStates) opened(key string, at, answered time.Time) {
	if st := w.get(key); at.After(st.opened) {
		st.opened, st.open = at, answered
	}
}

// down counts the watches a fault ended that are not open again, and says
// when the last that is open again was answered.
func (w watchStates) down() (n int, resumed time.Time) {
	for _, st := range w {
		switch {
		case st.ended.IsZero():
		case st.opened.Before(st.ended):
			n++
		default:
			resumed = maxTime(resumed, st.open)
		}
	}
	return n, resumed
}

// stop ends everything the execution started, within budget.
func (x *Exec) stop(budget time.Duration) error {
	x.mu.Lock()
	for _, t := range x.timers {
		if t.Stop() {
			x.wg.Done()
		}
	}
	for _, p := range x.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	x.mu.Unlock()
	done := make(chan struct{})
	go func() { x.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(budget):
		return fmt.Errorf("controllers still running %v after their context ended", budget)
	}
	for _, f := range x.files {
		_ = f.Close()
	}
	return os.RemoveAll(x.dir)
}
