package fuzz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Phase budgets of one execution. With a scenario's Bounds (lag over by
// MaxLagEnd+MaxDelay) they sum to at most Budget, so that an execution fits
// go test -fuzz's 10 s limit by construction. The start may also take the
// part of the lag budget its schedule does not need.
const (
	StartBudget  = 1000 * time.Millisecond
	DriveBudget  = 300 * time.Millisecond
	SettleBudget = 2000 * time.Millisecond // after the lag is over
	StopBudget   = 700 * time.Millisecond
	// Budget is the hard deadline of one execution; an overrun is a harness
	// error, never a finding.
	Budget = 8 * time.Second
	// MaxLong is the longest budget a long scenario's execution may have
	// (Scenario.Long).
	MaxLong = 10 * time.Minute
)

// budget is the scenario's budget of one execution: Long, or Budget.
func (s Scenario) budget() time.Duration { return max(Budget, s.Long) }

// HarnessError is an execution that could not be judged: the scenario failed
// to start, a controller died, the budget ran out, or the run never settled
// while its end state was wrong. It is never a finding.
type HarnessError struct {
	Err error
	// Unsettled says the controllers were still writing when the settle
	// budget ran out, and an oracle of end state could not judge the run.
	Unsettled bool
}

func (e *HarnessError) Error() string {
	return "stalefuzz harness error (not a finding): " + e.Err.Error()
}
func (e *HarnessError) Unwrap() error { return e.Err }

func harness(format string, args ...any) error {
	return &HarnessError{Err: fmt.Errorf(format, args...)}
}

// Env is what one process runs executions against: a control plane with the
// scenario's CRDs and a proxy. Start it once per process, outside any
// execution's clock.
type Env struct {
	s      Scenario
	cp     *controlplane.Environment
	reaper *reaper.Reaper // owns the executions' child processes
	proxy  *proxy.Proxy
	direct client.WithWatch
	sweep  *sweeper // removes what each execution left in the apiserver
	scheme *runtime.Scheme
	refs   map[string]map[string]any // knob settings → reference final state
	// learnedRefs are, per knob settings, what the no-fault reference runs
	// taught the count and end-state oracles (learnedReference); nil when
	// they were not clean.
	learnedRefs map[string]*learned
	// refRuns, when not nil, keeps each knob setting's first reference run
	// (the coordinator's, for referenceSeeds).
	refRuns map[string]*Result
	slack   time.Duration // budget multiplier: 10 while warming up, else 1
	// startSlack multiplies the start and restart budgets: 1 in a go test
	// -fuzz worker, whose every input must finish within Go's 10 s; else
	// StartSlack (a replay, a regression run, a false-alarm or truth-table
	// measurement), so that a slow interpreter or a loaded machine is no
	// harness error. The schedule's timing counts from the mark, after the
	// start, so it changes nothing a run does.
	startSlack time.Duration

	fixture any
	cleanup func() error
	// Ready is how long NewEnv took, by part.
	Ready Readiness

	crds  []*apiextensionsv1.CustomResourceDefinition // the scenario's, installed
	ownCP bool                                        // false: the control plane is Main's, shared
}

// Readiness is where an Env's start went: the control plane (started, or
// joined under Main) with the scenario's CRDs in discovery and the proxy;
// the scenario's Setup; the warm-up execution, which pays for discovery,
// REST mappings and connections outside any execution's clock; and, in a
// fuzzing worker, the no-fault reference runs it made itself (none when the
// campaign's coordinator learned them for every worker).
type Readiness struct {
	ControlPlane, Setup, WarmUp, References time.Duration
}

func (r Readiness) String() string {
	return fmt.Sprintf("%.1fs (control plane, CRDs and proxy %.1fs, setup %.1fs, warm-up execution %.1fs, reference runs %.1fs)",
		(r.ControlPlane + r.Setup + r.WarmUp + r.References).Seconds(), r.ControlPlane.Seconds(), r.Setup.Seconds(), r.WarmUp.Seconds(), r.References.Seconds())
}

// execSeq numbers the executions of this process, over every Env: Envs that
// share a control plane (Main) must never pick the same namespace.
var execSeq atomic.Int64

// NewEnv starts a control plane (or, under Main, joins the shared one) and a
// proxy for s.
func NewEnv(s Scenario) (*Env, error) { return newEnv(s, true) }

// newEnv is NewEnv; share false gives the Env a control plane of its own even
// under Main (the fuzz coordinator's, stopped before the campaign).
func newEnv(s Scenario, share bool) (_ *Env, retErr error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	e := &Env{s: s, scheme: s.Scheme, refs: map[string]map[string]any{}, learnedRefs: map[string]*learned{}}
	if e.scheme == nil {
		e.scheme = clientgoscheme.Scheme
	}
	began := time.Now()
	var err error
	e.cp, e.crds, e.ownCP, err = controlPlane(envtest.CRDInstallOptions{CRDs: s.CRDs, Paths: s.CRDPaths, ErrorIfPathMissing: true}, s.APIServerFeatureGates, share && len(s.APIServerFeatureGates) == 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, e.Stop())
		}
	}()
	procs, err := os.MkdirTemp(e.cp.Dir(), "procs-")
	if err != nil {
		return nil, fmt.Errorf("unable to create the directory of the executions' processes: %w", err)
	}
	if e.reaper, err = reaper.New(procs); err != nil {
		return nil, err
	}
	e.proxy = &proxy.Proxy{Upstream: e.cp.Config, Fields: append(slices.Clone(s.LostUpdates), s.Fields...)}
	if err := e.proxy.Start(); err != nil {
		return nil, err
	}
	if e.direct, err = client.NewWithWatch(e.cp.Config, client.Options{Scheme: e.scheme}); err != nil {
		return nil, fmt.Errorf("unable to create direct client: %w", err)
	}
	if e.sweep, err = newSweeper(e.cp.Config); err != nil {
		return nil, err
	}
	if err := e.primeRESTMappings(); err != nil {
		return nil, err
	}
	if err := e.primeServing(); err != nil {
		return nil, err
	}
	scopes, err := e.resolveScopes()
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	scopes = append(scopes, e.swept(scopes)...)
	if err := e.sweep.keepScoped(context.Background(), scopes); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	e.Ready.ControlPlane = time.Since(began)
	if s.Setup != nil {
		dir, err := os.MkdirTemp(e.cp.Dir(), "fixture-")
		if err != nil {
			return nil, fmt.Errorf("scenario %s: unable to create fixture directory: %w", s.Name, err)
		}
		if e.fixture, e.cleanup, err = s.Setup(context.Background(), dir); err != nil {
			return nil, fmt.Errorf("scenario %s: setup: %w", s.Name, err)
		}
	}
	// A first execution pays for discovery, REST mappings and connections;
	// it runs here, outside any execution's clock, with relaxed budgets.
	e.Ready.Setup = time.Since(began) - e.Ready.ControlPlane
	e.slack = 10
	if err := e.warmUp(context.Background()); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	e.slack = 1
	e.startSlack = 1
	if !isFuzzing() {
		e.startSlack = StartSlack
	}
	e.Ready.WarmUp = time.Since(began) - e.Ready.ControlPlane - e.Ready.Setup
	return e, nil
}

// Stop stops the proxy and the control plane (unless Main shares it). It is
// idempotent.
func (e *Env) Stop() error {
	var errs []error
	if e.cleanup != nil {
		errs = append(errs, e.cleanup())
		e.cleanup = nil
	}
	if e.proxy != nil {
		errs = append(errs, e.proxy.Stop())
	}
	if e.reaper != nil {
		errs = append(errs, e.reaper.Stop())
	}
	if e.cp != nil && e.ownCP {
		errs = append(errs, e.cp.Stop())
	}
	// Both Stops are idempotent, so Stop is too.
	return errors.Join(errs...)
}

// Input is sched as an input of the scenario's space (Scenario.EncodeExactly),
// which replays it; false when the space cannot hold it.
func (e *Env) Input(sched Schedule) ([]byte, bool) {
	b, err := e.s.EncodeExactly(sched)
	return b, err == nil
}

// Proxy is the proxy the executions run behind.
func (e *Env) Proxy() *proxy.Proxy { return e.proxy }

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

// extraStart is what the start and the schedule's restarts may take beyond
// their budgets (startSlack), added to the execution's budget.
func (e *Env) extraStart(sched Schedule) time.Duration {
	if e.startSlack <= 1 {
		return 0
	}
	extra := StartBudget
	for _, st := range sched.Steps {
		if st.IsRestart() {
			extra += RestartBudget
		}
	}
	return extra * (e.startSlack - 1) * e.slack
}

func (e *Env) run(ctx context.Context, sched Schedule, o runOptions) (res *Result, retErr error) {
	start := time.Now()
	budget := e.s.budget() * e.slack
	if o.within > 0 {
		budget = o.within
	}
	budget += e.extraStart(sched)
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
	res.Settled, res.SettledIdle, byProbe, lagOver = e.settle(ctx, x, driven, maxTime(lagEnd, driven), deadline.Add(SettleBudget*e.slack), true)
	if res.Settled && byProbe && !e.convergedNow(ctx, x) {
		// A probe cannot see an event its client has read but not yet
		// queued (a loaded machine can take longer than ProbedQuiet to): a
		// run whose end state is wrong settles only by the full quiet
		// period, which the scenario makes longer than any retry.
		res.Settled, res.SettledIdle, _, _ = e.settle(ctx, x, driven, maxTime(lagEnd, driven), deadline.Add(SettleBudget*e.slack), false)
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
		addErr = e.proxy.AddRules(rules...)
	})
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
		outOfBudget := !timersDue && now.After(maxTime(deadline, timerDone.Add(SettleBudget*e.slack)))
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

// primeServing waits until the apiserver serves every CRD's resource as it
// will during the executions. A freshly installed CRD's watch cache answers
// 429 "storage is (re)initializing" for a moment, and client-go then waits
// the Retry-After (a second) before it tries again; and for two seconds
// after a CRD was established, the apiserver holds every create of its
// objects for two seconds (customresource_handler.go: "we want to track
// recently created CRDs ... in HA environments"). Both waits belong to the
// Env's start, not to an execution.
func (e *Env) primeServing() error {
	dc, err := discovery.NewDiscoveryClientForConfig(e.cp.Config)
	if err != nil {
		return fmt.Errorf("scenario %s: unable to create a discovery client: %w", e.s.Name, err)
	}
	var createsHeldUntil time.Time
	for _, installed := range e.crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		raw, err := dc.RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", installed.Name).DoRaw(context.Background())
		if err == nil {
			err = json.Unmarshal(raw, crd)
		}
		if err != nil {
			return fmt.Errorf("scenario %s: unable to get CustomResourceDefinition %s: %w", e.s.Name, installed.Name, err)
		}
		for _, c := range crd.Status.Conditions {
			// The condition's time is kept to the second; the apiserver
			// compares with that.
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				createsHeldUntil = maxTime(createsHeldUntil, c.LastTransitionTime.Add(2*time.Second))
			}
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			path := "/apis/" + crd.Spec.Group + "/" + v.Name + "/" + crd.Spec.Names.Plural
			var last error
			err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				body, err := dc.RESTClient().Get().AbsPath(path).Param("watch", "true").Param("resourceVersion", "0").
					Param("timeoutSeconds", "1").MaxRetries(0).Stream(ctx)
				if last = err; err != nil {
					return false, nil
				}
				return true, body.Close()
			})
			if err != nil {
				return fmt.Errorf("scenario %s: the apiserver never served a watch of %s: %w", e.s.Name, path, errors.Join(err, last))
			}
		}
	}
	time.Sleep(time.Until(createsHeldUntil.Add(50 * time.Millisecond)))
	return nil
}

// primeRESTMappings waits until the direct client can map every CRD's kind:
// a freshly installed CRD takes a moment to appear in discovery, and that
// moment must not fall inside an execution's budget.
func (e *Env) primeRESTMappings() error {
	for _, crd := range e.crds {
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			_, err := e.direct.RESTMapper().RESTMapping(gk)
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("scenario %s: kind %s never appeared in discovery: %w", e.s.Name, gk, err)
		}
	}
	return nil
}

// warmUp runs the scenario without lag, outside any execution's clock, and
// checks that every declared client sends requests and every declared
// resource is requested, so that a lag step can act on each: a name with a
// typo would otherwise only mean that the fuzzer finds nothing. A client or
// resource that only some knob settings use is looked for in the first
// MaxReferenceSettings settings, one run each, as long as one is missing.
func (e *Env) warmUp(ctx context.Context) error {
	clients, resources := map[string]bool{}, map[string]bool{}
	requested := map[string]bool{} // every resource the declared clients requested
	var tried []map[string]int
	for i, knobs := range knobSettings(e.s.Knobs, MaxReferenceSettings) {
		if i > 0 && len(clients) == len(e.s.Clients) && len(resources) == len(e.s.Resources) {
			break
		}
		res, err := e.run(ctx, Schedule{Knobs: knobs}, runOptions{})
		if err != nil {
			return fmt.Errorf("warm-up execution without lag (%v): %w", Schedule{Knobs: knobs}, err)
		}
		tried = append(tried, knobs)
		for _, r := range res.Trace.Requests {
			if slices.Contains(e.s.Clients, r.Client) {
				clients[r.Client] = true
				if r.Resource != "" {
					requested[r.Resource] = true
				}
			}
			if slices.Contains(e.s.Resources, r.Resource) {
				resources[r.Resource] = true
			}
		}
	}
	var errs []error
	for _, c := range e.s.Clients {
		if !clients[c] {
			errs = append(errs, fmt.Errorf("declared client %q sent no request in runs without lag at knob settings %v, so no lag step can act on it: run a controller as that client (Exec.StartManager, Exec.Command, Exec.Config or Exec.Kubeconfig with that name), or remove it from Scenario.Clients", c, tried))
		}
	}
	for _, r := range e.s.Resources {
		if !resources[r] {
			errs = append(errs, fmt.Errorf("declared resource %q was requested by no client in runs without lag at knob settings %v, so no lag step can act on it: %s (the clients requested: %s)", r, tried, e.servedAs(r), strings.Join(slices.Sorted(maps.Keys(requested)), ", ")))
		}
	}
	return errors.Join(errs...)
}

// servedAs says whether the apiserver serves a resource of that plural
// name, for an error about it.
func (e *Env) servedAs(resource string) string {
	gvrs, err := e.direct.RESTMapper().ResourcesFor(schema.GroupVersionResource{Resource: resource})
	if err != nil || len(gvrs) == 0 {
		return `the apiserver serves no resource of that name (Scenario.Resources takes plural resource names, as in the URL: "configmaps", "gitrepositories")`
	}
	if gvrs[0].Resource != resource {
		return fmt.Sprintf("did you mean %q (%s)? Scenario.Resources takes plural resource names, as in the URL", gvrs[0].Resource, gvrs[0])
	}
	return fmt.Sprintf("the apiserver serves it (%s); have a controller watch it, or remove it from Scenario.Resources", gvrs[0])
}
