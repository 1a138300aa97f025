package fuzz

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Scenario is everything the engine needs to run a controller under lag. It
// is a plain value: a FuzzXxx target and a ginkgo spec consume the same one.
type Scenario struct {
	// Name names the scenario in namespaces, findings and file names.
	Name string

	// CRDs are installed once per process. Zero: none.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// CRDPaths are files or directories of CRD manifests, installed once per
	// process. Zero: none.
	CRDPaths []string

	// APIServerFeatureGates are the apiserver's --feature-gates
	// (controlplane.Environment.FeatureGates): {"WatchList": false} runs
	// an apiserver as 1.31 and 1.33 ship it, whose informers' initial lists
	// are LISTs served from the watch cache. A scenario with gates has a
	// control plane of its own, never the one a test binary's Envs share.
	// Zero: the release's defaults.
	APIServerFeatureGates map[string]bool

	// Scheme holds the types the scenario's clients use. Zero: client-go's.
	Scheme *runtime.Scheme

	// Clients names the proxy clients the controllers use (one per
	// controller or replica). Lag steps pick among them.
	Clients []string

	// Resources lists the plural resources lag steps pick among.
	Resources []string

	// Objects lists object names a lag step may be scoped to. Zero: steps
	// always cover the whole namespace.
	Objects []string

	// Scopes maps each resource of Resources whose objects do not live in
	// the execution's namespace to where they do: a namespace's name
	// ("kube-node-lease" for Nodes' Leases), or Cluster for a
	// cluster-scoped resource (nodes, clusterissuers). A lag step on such a
	// resource acts there; a step on every resource (Step.Resource empty)
	// acts in the execution's namespace only. Since those objects are not
	// isolated by a namespace of their own, each execution's sweep removes
	// every object of these resources, there, that was not there when
	// NewEnv began: the workload's and the controllers' alike. NewEnv
	// refuses a cluster-scoped resource of Resources missing here. Zero:
	// every resource lives in the execution's namespace.
	Scopes map[string]string

	// Sweep are kinds whose objects live outside the execution's
	// namespace (cluster-scoped ones: ClusterRoles, ClusterIssuers) that
	// executions create but faults need not act on: as for the resources
	// of Scopes, each execution's sweep removes every object of theirs that
	// was not there when NewEnv began, so that no execution meets another's.
	// A namespaced kind here is swept with the namespace anyway, and a kind
	// the apiserver does not serve when NewEnv begins (a CRD a controller
	// installs later) is left out. Zero: none.
	Sweep []schema.GroupVersionKind

	// Knobs are settings the fuzzer chooses besides lag. Zero: none.
	Knobs []Knob

	// Space says whether schedules may drop events. Zero: LagOnly.
	Space Space

	// Bounds limit the lag windows. Zero: DefaultBounds.
	Bounds Bounds

	// Long, when set, is the budget of one execution instead of Budget
	// (more than Budget, at most MaxLong): a workflow whose step waits
	// for a timer its controller cannot shorten (a constant in its code,
	// such as the Job controller's 10 s back-off after a failed Pod) must
	// run that long to reach it. Bounds may then reach as far into the
	// execution as the longer budget allows. go test -fuzz kills an input
	// after 10 s, so Fuzz refuses such a scenario while fuzzing: its
	// campaigns run under package fuzz/longrun's driver (stalefuzz fuzz
	// uses it for a target file with a budget), and its corpus entries
	// replay under go test as any other's. Zero: Budget.
	Long time.Duration

	// Fields are dotted JSON paths the trace records from every JSON
	// response (besides LostUpdates'), for Features and the timeline. Zero:
	// none.
	Fields []string

	// Setup prepares what every execution of a process shares (a git server,
	// say) once, before the warm-up run, outside any execution's clock; its
	// value is Exec.Fixture, and cleanup runs at Env.Stop. dir is its own
	// directory, removed even if the process dies. Zero: nothing.
	Setup func(ctx context.Context, dir string) (fixture any, cleanup func() error, err error)

	// Start starts the controllers of one execution and returns once they
	// are running with synced caches. Everything it starts must be started
	// through Exec.Go or Exec.Command, so that the engine stops it. Required.
	Start func(ctx context.Context, x *Exec) error

	// Drive performs the workload: creating objects, user actions. It runs
	// right after the mark (t=0 of the lag windows) and must return quickly;
	// later actions are scheduled with Exec.After. Required.
	Drive func(ctx context.Context, x *Exec) error

	// Converge, when set, is the convergence and stuck oracle for the
	// objects of one kind in the execution's namespace.
	Converge *Convergence

	// AwaitCurrent are kinds whose objects in the execution's namespace a
	// run waits for, besides the quiet period, before it counts as
	// settled: each must be kstatus Current or Failed (not InProgress, not
	// Terminating). For the objects of controllers that retry with no
	// request the trace could show: kube-controller-manager's StatefulSet,
	// ReplicaSet, DaemonSet and Job controllers (target.Builtins) return an
	// error from a sync whose informer is older than their own last write
	// (the StaleControllerConsistency gates, beta and on since 1.36) and
	// requeue it with their workqueue's rate limiter, 5 ms doubled per
	// failure, without a request; an event that would enqueue it sooner
	// may never come (a Pod's delete whose owner has been replaced). So a
	// run can be quiet for longer than Quiet while a StatefulSet still
	// lacks its Pod. The wait is within the settle budget only: when the
	// budget runs out with the run quiet but an object not Current, the
	// run never settled (Result.NotCurrent names the objects), and the
	// oracles that judge a settled run only do not judge it: the backoff
	// doubles with every failed sync, and a false-alarm measurement
	// (prometheus-operator's) had the StatefulSet controller wait 10 s.
	// Zero: none.
	AwaitCurrent []schema.GroupVersionKind

	// LostUpdates lists dotted JSON paths ("status.plan.id") whose
	// acknowledged values must never be replaced by a write whose writer had
	// not seen them: the lost-update oracle. Zero: oracle off.
	LostUpdates []string

	// LostUpdatesAnyField extends the lost-update oracle to every field a
	// write sets (its body's values, trace.Write.Set; the workload's own
	// writes by the same rule, proxy.BodyValues), except the fields a
	// controller changed in the two no-fault reference runs of the same
	// knob settings: a field the controllers rewrite in a healthy run (a
	// status they recompute, a counter) is theirs to rewrite, while one
	// they never change there (the user's spec, a name or plan a
	// controller sets once) must not be replaced from a view that predates
	// its value. Only resources the writer reads at all are judged: a
	// client that never watches, gets or lists a resource (an event
	// recorder and its events) writes there blind by design, which the
	// blind-write audit reports. A knob setting whose reference runs were
	// not clean is not judged. Zero: only LostUpdates' paths.
	LostUpdatesAnyField bool

	// StaleSelfView is the stale-self-view oracle: a stored write sent
	// from a view older than its writer's own last acknowledged write to
	// the object (audit.SelfStale: its cache had not yet shown it what it
	// had itself written) that replaced a value of that own write, which
	// no later write restored, is a violation naming both writes, their
	// resourceVersions and the fields. Whatever the oracle, every
	// execution counts such writes (Result.SelfViews), and a finding's
	// report lists them as a likely cause. Zero: not judged.
	StaleSelfView bool

	// Counts are count-safety oracles: kinds whose live objects per
	// controller owner must never outnumber what no-fault runs have. Zero:
	// none.
	Counts []Count

	// EndStates are end-state oracles: kinds whose objects, once a run
	// settled, must match two no-fault reference runs of its knob settings
	// where those agree (EndState). Zero: none.
	EndStates []EndState

	// Crash is ignored: the crash oracle is always on. A controller
	// process (Exec.Command) that exits on its own during the execution,
	// outside a restart the schedule asked for, or a controller that logs
	// a Go panic ("panic: " at the start of a line, or controller-runtime's
	// "Observed a panic" of a panic it recovered), is a violation naming
	// the client, its exit status and its stack (or its last lines). Only
	// one that exits before its watches first synced is a harness error (a
	// controller that cannot start is no finding; a restarted one that
	// exits while it syncs again is a finding), as is a process the
	// harness killed itself.
	//
	// Deprecated: a crash is always a finding; before, the zero value
	// made an exit a harness error and left panics unread.
	Crash bool

	// Storm is the storm oracle: a run that never settled because, once the
	// faults were over, its controllers kept writing and got nowhere (the
	// convergence oracle's noProgress: writes that meet 409, fail or change
	// nothing, and none or fewer that change an object) or went round in
	// circles (a field of one object set back to the value it held just
	// before the last, a → b → a, by successful writes, StormFlaps times),
	// while the two no-fault
	// reference runs of the same knob settings settled. Writes that got
	// nowhere count only when the settle budget ran out at least Quiet
	// after the last write that changed an object: otherwise the budget,
	// not they, kept the run from settling (a healthy controller's round
	// of unconditional writes on a loaded machine). The violation names
	// the object, the field and the clients. A run whose reference runs did
	// not settle is not judged; one that writes on with progress is a slow
	// machine (a harness error), never a storm. Zero: not judged.
	Storm bool

	// Differential, when set, compares each execution's final state with a
	// no-lag reference run of the same knob settings.
	Differential *Differential

	// Checks are the scenario's own oracles, run after the execution
	// settled. Zero: none.
	Checks []Check

	// Features adds scenario-specific signal from an execution's trace
	// (e.g. the condition reasons an object passed through), so that new
	// behaviour counts as new coverage. Zero: none.
	Features func(res *Result) []string

	// Quiet is how long no writes and no held events must last for the run
	// to count as settled. Make it longer than the controllers' longest retry
	// backoff, so that a controller waiting to retry is not called settled,
	// and shorter than SettleBudget, so that settling is possible at all
	// (NewEnv refuses one that is not). Zero: DefaultQuiet. After a run of
	// failed writes (409s, errors) by one client, the quiet lasts at least
	// the wait client-go's default rate limiter puts before that client's
	// next retry (5 ms doubled per failure, up to SettleBudget), whatever
	// Quiet says.
	Quiet time.Duration

	// KnownBug, when set, says the scenario is a known-bad variant kept to
	// show that the fuzzer finds its bug: while fuzzing, a violation is a
	// finding as usual; in a regression run (plain go test), each committed
	// corpus entry in testdata/fuzz must still reproduce a violation in one
	// of KnownBugRuns runs, or the test fails. Zero: no known bug.
	KnownBug string

	// Known are findings already reported, which a campaign searches past
	// (Known). Zero: every violation is a finding.
	Known []Known

	// LeaderElection says, per client, how its install runs it
	// (LeaderElection): the harness runs it without, and a finding's
	// report says what its restart needs as deployed. Zero: no client
	// runs with leader election.
	LeaderElection map[string]LeaderElection

	// Seeds are schedules every campaign starts from, besides the corpus in
	// testdata. Zero: none.
	Seeds []Schedule

	// SeedsOnlyFuzzing makes Seeds starting points of campaigns only: a
	// plain go test run (regression) does not execute them, only the
	// committed corpus. For scenarios with many seeds, to keep the suite
	// lean.
	SeedsOnlyFuzzing bool
}

// Cluster, as the value of a resource in Scenario.Scopes, says its objects
// are cluster-scoped: they have no namespace.
const Cluster = ""

// namespaceOf is where the lag steps on resource act, for an execution in
// namespace ns: "" (every namespace, which a cluster-scoped object's is) for
// a cluster-scoped resource.
func (s Scenario) namespaceOf(resource, ns string) string {
	if where, ok := s.Scopes[resource]; ok && resource != "" {
		return where
	}
	return ns
}

// DefaultQuiet is Scenario.Quiet's default.
const DefaultQuiet = 300 * time.Millisecond

func (s Scenario) quiet() time.Duration {
	if s.Quiet == 0 {
		return DefaultQuiet
	}
	return s.Quiet
}

// validQuiet: settling needs Quiet without writes after the lag ends, within
// SettleBudget; a Quiet that does not fit would make every run "unsettled",
// so the stuck oracle could never fire and every slow run would be judged by
// the convergence oracle alone.
func (s Scenario) validQuiet() error {
	if q := s.quiet(); q < 0 || q >= SettleBudget {
		return fmt.Errorf("quiet period %v: want 0 < Quiet < SettleBudget (%v)", q, SettleBudget)
	}
	return nil
}

// Convergence says which objects must converge: every object of GVK in the
// namespace reaches status.observedGeneration == metadata.generation and
// condition Ready=True once the lag is over; or, with KStatus, kstatus
// Current.
type Convergence struct {
	GVK schema.GroupVersionKind
	// Ready is the condition type that must be True. Zero: "Ready". Only
	// without KStatus, which reads a Ready condition itself (Validate
	// refuses both).
	Ready string
	// KStatus judges each object by kstatus instead, for controllers
	// without a Ready condition: sigs.k8s.io/cli-utils/pkg/kstatus/status,
	// what Flux and kpt wait on. An object has converged when kstatus
	// computes Current for it. For a custom resource that is: not being
	// deleted, status.observedGeneration == metadata.generation where the
	// status has one, no condition Reconciling=True or Stalled=True, and
	// Ready=True where it has a Ready condition. An object whose status has
	// none of these (no controller has written it yet) is Current too:
	// kstatus cannot tell it from one that needs none, so a scenario whose
	// objects must have been seen adds a Check. Built-in kinds are judged
	// by kstatus' own rules (a Deployment's replicas, a Job's completion).
	// The verdict on an object that has not converged names kstatus'
	// status, its message and reason, and observedGeneration against
	// generation where the status has one. Zero: Ready and
	// observedGeneration, as above.
	KStatus bool
}

// Differential compares the final state of the objects of GVK with the
// reference run's, ignoring metadata and the Ignore paths (dotted, e.g.
// "status.plan.id", "status.conditions").
type Differential struct {
	GVK    schema.GroupVersionKind
	Ignore []string
}

// Check is a scenario's own oracle: it returns an error naming the object and
// field when the execution violated it, or a *HarnessError when the
// execution cannot be judged (the workload itself fell behind on a loaded
// machine, say): that run is retried, never a finding.
type Check struct {
	Name string
	Fn   func(ctx context.Context, x *Exec, tr trace.Trace) error
}
