package fuzz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	// refsGaveUp are, per knob settings, the waits that gave up in both of
	// the differential's reference runs (the workflow as written).
	refsGaveUp map[string][]string
	// learnedRefs are, per knob settings, what the no-fault reference runs
	// taught the count and end-state oracles (learnedReference); nil when
	// they were not clean.
	learnedRefs map[string]*learned
	// unclean says, per knob settings whose learnedRefs entry is nil, why
	// (which reference run, and what: a harness error, a violation, a run
	// that never settled), for the logs that say the oracles are off.
	unclean map[string]string
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
	// settleSlack multiplies the settle budget the same way (1 in a go
	// test -fuzz worker, else SettleSlack), and only while the controllers
	// are still making progress (settleExtends).
	settleSlack time.Duration

	fixture any
	cleanup func() error
	// Ready is how long NewEnv took, by part.
	Ready Readiness

	crds []*apiextensionsv1.CustomResourceDefinition // the scenario's, installed
	// listMaps are the crds' lists of type map, by kind: the end-state
	// oracle names their elements by key (flattener).
	listMaps map[schema.GroupVersionKind]listMaps
	ownCP    bool // false: the control plane is Main's, shared
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
	e := &Env{s: s, scheme: s.Scheme, refs: map[string]map[string]any{}, refsGaveUp: map[string][]string{}, learnedRefs: map[string]*learned{}, unclean: map[string]string{}}
	if e.scheme == nil {
		e.scheme = clientgoscheme.Scheme
	}
	began := time.Now()
	var err error
	e.cp, e.crds, e.ownCP, err = controlPlane(envtest.CRDInstallOptions{CRDs: s.CRDs, Paths: s.CRDPaths, ErrorIfPathMissing: true}, s.APIServerFeatureGates, share && len(s.APIServerFeatureGates) == 0)
	e.listMaps = crdListMaps(e.crds)
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
	e.startSlack, e.settleSlack = 1, 1
	if !isFuzzing() {
		e.startSlack, e.settleSlack = StartSlack, SettleSlack
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
