package target

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// Target is one controller under test, as a target file declares it. Its
// YAML form uses the field names in the yaml tags; a Go user may build the
// value directly.
type Target struct {
	// Name names the target in namespaces, findings and file names: lower
	// case letters, digits and dashes. Required.
	Name string `yaml:"name"`

	// Dir is the directory relative paths are resolved against: the target
	// file's own directory when loaded from a file. Zero: the working
	// directory.
	Dir string `yaml:"-"`

	// Controllers are the processes under test. At least one.
	Controllers []Controller `yaml:"controllers"`

	// Builtins run beside the controllers: kube-controller-manager's
	// controllers, kube-scheduler and a kubelet stand-in. Zero: none.
	Builtins *Builtins `yaml:"builtins"`

	// Scheme, in the Go form only, holds the types in-process controllers
	// (Controller.Setup) and the engine's clients use: the CRDs' Go types.
	// Zero: client-go's.
	Scheme *runtime.Scheme `yaml:"-"`

	// CRDs are CRD manifests: files, directories, or a path inside a Go
	// module ("module@version:config/crd/bases"). Zero: none.
	CRDs []string `yaml:"crds"`

	// Knobs are the choices the fuzzer makes besides faults; steps,
	// controllers' args and env refer to a knob's value as ${name}.
	Knobs []Knob `yaml:"knobs"`

	// Workload is the user's actions, in order. At least one.
	Workload []Step `yaml:"workload"`

	// Faults says where schedules act. Zero: lag only, on every resource the
	// controllers watch in the namespace of the execution.
	Faults Faults `yaml:"faults"`

	// Oracles says how an execution is judged.
	Oracles Oracles `yaml:"oracles"`

	// Fixtures are what the controllers reach besides the apiserver, which
	// stalefuzz serves once per process for all its executions.
	Fixtures Fixtures `yaml:"fixtures"`

	// APIServer is how the control plane's kube-apiserver runs. Zero: as
	// its release ships it.
	APIServer APIServer `yaml:"apiserver"`

	// Budget is how long one execution may last, when its workflow must
	// wait for a timer the controller cannot shorten (a constant in its
	// code, such as the Job controller's 10 s back-off after a failed Pod;
	// a timer a flag or a spec field sets is scaled there instead): a
	// duration over 8s (fuzz.Budget), at most 10m (fuzz.MaxLong). Each
	// fault's and lag window's range then stretches with it, over the first
	// half of what the longer budget leaves after the start, settling and
	// stopping, so that faults reach the timer's aftermath and the
	// workflow's timers still fit after the last fault. go test -fuzz kills an input
	// after 10 s: stalefuzz fuzz runs such a target's campaign with its
	// own driver (package fuzz/longrun) in Go's corpus format, and
	// stalefuzz replay, false-alarms and truth-table run it as any other.
	// Zero: 8s.
	Budget string `yaml:"budget"`
}

// Long is the target's budget of one execution (Budget) when it has one,
// else 0. Validate refuses a budget that does not parse.
func (t *Target) Long() time.Duration {
	d, _ := parseDuration(t.Budget)
	return d
}

// APIServer is how the control plane's kube-apiserver runs.
type APIServer struct {
	// FeatureGates are its --feature-gates, by name: {WatchList: false}
	// runs it as 1.31 and 1.33 ship it, so that a client-go informer's
	// initial list is a LIST at resourceVersion 0 served from the watch
	// cache, not a watch with its initial events (fuzz.Scenario.
	// APIServerFeatureGates). A target with gates has a control plane of
	// its own. Zero: the release's defaults.
	FeatureGates map[string]bool `yaml:"featureGates"`
}

// Controller is one controller process: a command line, or a Go main
// package that Prepare builds.
type Controller struct {
	// Name is the proxy client it runs as (with -0, -1, ... for replicas).
	// Required.
	Name string `yaml:"name"`

	// Command is the command line: its first element a path (relative to
	// the target's Dir when it contains a slash) or a name looked up in
	// PATH. Exactly one of Command, Go and Setup.
	Command []string `yaml:"command"`

	// Setup, in the Go form only, runs the controller in-process instead
	// of as a process: a controller-runtime manager as this controller's
	// proxy client (fuzz.Exec.StartManager: its cache scoped to the
	// execution's namespace, no leader election or listeners, its log kept
	// in the execution's), on which Setup registers the reconcilers; x.Knob
	// gives the index of a knob's value in Knob.Values. A restart stops the
	// manager and runs Setup on a new one. Args, Env, Kubeconfig and
	// NamespaceEnv do not apply.
	Setup func(ctx context.Context, x *fuzz.Exec, mgr manager.Manager) error `yaml:"-"`

	// Go is a main package at a version, "module/path/cmd@v1.2.3", or a
	// directory of the target's, "./dir" or "../dir" (relative to Dir), that
	// holds a main package: in a Go module of its own (its go.mod and
	// go.sum: a main that links a project's packages at a pinned version),
	// or in the module around it (a controller's own repository). Built by
	// Prepare and cached by a hash of the module's sources (and of modules
	// its go.mod replaces with a local directory), so an edit anywhere in
	// them builds it again. Args are appended to it.
	Go string `yaml:"go"`

	// Patches are changes to the controller's sources, applied before it is
	// built: a fix tried against the release (SourcePatch). Only with Go. The
	// binary is cached apart from the release's, by a hash of the patches'
	// contents and modules, so an edit builds it again. STALEFUZZ_PATCHES
	// (set by a command's --patch) adds more, after the file's.
	Patches []SourcePatch `yaml:"patches"`

	// Args are more arguments, after Command's or Go's binary. ${knob} is
	// a knob's value, ${namespace} the execution's namespace, ${git.NAME} a
	// git fixture's URL; and, for each process (each replica), ${dir} a
	// directory of its own for the execution (kept across a restart, as a
	// pod's volume is) and ${port.NAME} a free port of 127.0.0.1 of its own
	// for the execution, one per NAME (storage, metrics, health: a
	// controller's listeners never collide with another worker's).
	Args []string `yaml:"args"`

	// Env are environment variables set for it, besides this process's own
	// environment. Their values take the references Args take.
	Env map[string]string `yaml:"env"`

	// Kubeconfig says how it gets its kubeconfig. Zero: the environment
	// variable KUBECONFIG.
	Kubeconfig Kubeconfig `yaml:"kubeconfig"`

	// NamespaceEnv is an environment variable that receives the namespace
	// of the execution (the one the controller should watch). Zero: none.
	NamespaceEnv string `yaml:"namespaceEnv"`

	// LeaderElection is how the controller's install runs it: whether
	// with leader election, and then its lease and whether it releases
	// the lease when stopped gracefully. stalefuzz runs every controller
	// without (turn it off in Args), so a restart lists at once; a
	// finding's report then says what the same restart needs as deployed
	// (fuzz.Step.AsDeployed): a replacement waits for the old lease. Zero:
	// the install runs it without leader election.
	LeaderElection *LeaderElection `yaml:"leaderElection"`

	// Replicas is how many copies run, each its own client. Zero: 1.
	Replicas int `yaml:"replicas"`

	// Watches are the resources (plural, "configmaps") whose watches must
	// have synced before the workload starts. Zero: none is waited for.
	Watches []string `yaml:"watches"`
}

// SourcePatch is a unified diff (as git diff or diff -u writes it: paths
// relative to the module's root under a/ and b/) applied with patch -p1 to
// a copy of a module a Go controller is built from.
type SourcePatch struct {
	// File is the diff, relative to the target's Dir. Required.
	File string `yaml:"file"`
	// Module is the module it changes: one the controller's main package
	// requires (the version its build selects is copied, patched, and
	// replaced into the build), such as the library a local main links.
	// Zero: the module of Go "module/path/cmd@version" itself (for a
	// local directory, Module is required).
	Module string `yaml:"module"`
}

func (p SourcePatch) String() string {
	if p.Module == "" {
		return p.File
	}
	return p.File + " (to " + p.Module + ")"
}

// Kubeconfig is how a controller gets the path of its kubeconfig: in an
// environment variable, or as a flag's value ("--kubeconfig" gives
// "--kubeconfig=PATH"). At most one. Zero: Env KUBECONFIG.
type Kubeconfig struct {
	Env  string `yaml:"env"`
	Flag string `yaml:"flag"`
}

// Knob is a choice among values, made by the fuzzer per execution.
type Knob struct {
	Name   string   `yaml:"name"`
	Values []string `yaml:"values"`
}

// Step is one action of the workload. Exactly one of Apply, Patch, Delete
// and Wait.
type Step struct {
	// At is when the step starts, after the mark (t=0 of the fault
	// windows); a step never starts before the previous one ended. A
	// duration ("500ms") or a knob reference ("${edit}"). Zero: right after
	// the previous step.
	At string `yaml:"at"`

	Apply *Apply `yaml:"apply"`
	Patch *Patch `yaml:"patch"`
	// Delete deletes an object; one already absent is written to the
	// execution's log, as a wait that timed out is, not an error.
	Delete *Object `yaml:"delete"`
	Wait   *Wait   `yaml:"wait"`
	// Node is a Node's kubelet joining, stopping, coming back or the Node
	// leaving (package fuzz/nodes).
	Node *NodeStep `yaml:"node"`
}

// NodeStep acts on one Node through a kubelet stand-in (package
// fuzz/nodes): exactly one of Join, Stop, Resume and Leave, each naming the
// Node. Join creates it Ready, with Zone as its topology.kubernetes.io/zone
// (and region "region-1") when set, and its Lease in kube-node-lease,
// renewed every 100 ms (a real kubelet renews a 40 s Lease every 10 s; the
// Lease here lasts 1 s: run kube-controller-manager's node lifecycle
// controller with a grace period of 1 s or more). Stop is its kubelet gone
// (a crashed node, a partitioned zone): the Lease is no longer renewed.
// Resume is the kubelet back: the Node posted Ready, its Lease renewed
// again. Leave deletes the Node and its Lease. Stop, Resume and Leave name
// a Node an earlier step joined. The Nodes a workload joined are deleted
// when the execution ends; list nodes and leases under faults.resources
// (scopes nodes: cluster, leases: kube-node-lease) to put faults on their
// events.
type NodeStep struct {
	Join   string `yaml:"join"`
	Zone   string `yaml:"zone"`
	Stop   string `yaml:"stop"`
	Resume string `yaml:"resume"`
	Leave  string `yaml:"leave"`
}

// Apply creates the objects of a manifest (YAML, one or more documents) in
// the execution's namespace, or patches those that exist with it: a JSON
// merge patch with no resourceVersion, the fields kubectl apply sends, so
// that a controller's write in between is no conflict and its finalizers,
// labels and annotations stay. Exactly one of File and Manifest.
type Apply struct {
	File     string `yaml:"file"`
	Manifest string `yaml:"manifest"`
}

// Object names one object in the execution's namespace (or a
// cluster-scoped one).
type Object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
}

// Patch changes one object as a user would.
type Patch struct {
	Object `yaml:",inline"`
	// Type is "merge" (RFC 7386), "json" (RFC 6902) or "apply" (a
	// server-side apply, forced, by field manager "stalefuzz-workload"; the
	// body is the object's fields without apiVersion, kind or metadata.name,
	// which the step supplies: list-map entries such as conditions merge by
	// key). Zero: merge.
	Type string `yaml:"type"`
	// Patch is the patch's body, JSON or YAML.
	Patch string `yaml:"patch"`
	// Subresource is "status" to patch the status subresource (as a
	// command-line tool that writes a condition does). Zero: the object.
	Subresource string `yaml:"subresource"`
}

// Wait waits until an object exists and, where JSONPath is set, until the
// value at JSONPath equals Value; with Current, until kstatus says it is
// Current (sigs.k8s.io/cli-utils: its status says its spec is done, as Flux
// and kpt wait for it). Zero Timeout: 5s.
type Wait struct {
	Object   `yaml:",inline"`
	JSONPath string `yaml:"jsonPath"`
	Value    string `yaml:"value"`
	// ValueFrom, instead of Value, is a JSONPath into the same object read
	// at the same time: the wait ends when the value at JSONPath is the
	// value there, and not empty ('{.status.observedGeneration}' from
	// '{.metadata.generation}': the controller's status is for the spec
	// last written, whatever the number; a value that names no release's
	// hash or count).
	ValueFrom string `yaml:"valueFrom"`
	Current   bool   `yaml:"current"`
	Timeout   string `yaml:"timeout"`
	// Required makes the step one the user's workflow must reach (a
	// pipeline that promotes, then waits for the rollout to finish, and
	// fails at its deadline). A wait that timed out is judged once the
	// run has settled: if the object still does not show the value then,
	// with nothing in flight and nothing written for the quiet period,
	// the run violates the oracle "stuck" (the workflow stopped short
	// though its controllers had nothing left to do). Reached late, or
	// a run that never settled (a slow machine, a controller still at
	// work), is not a violation; nor is a required wait after another
	// wait of the run that timed out: the workload went on without what
	// that one waited for (a promote sent before the pause it was meant
	// for), which no user's workflow does. This oracle needs no reference
	// run, so it also judges a bug that every no-fault run has. Give it a
	// condition that holds once reached (a phase at the end, a count after
	// a scale-down), not one the workflow passes through. Zero: the wait
	// only paces the workload. Either way, a wait that timed out leaves
	// the run's end state unjudged (fuzz.Exec.Diverged).
	Required bool `yaml:"required"`
}

// Fixtures are services the controllers use besides the apiserver.
type Fixtures struct {
	// Git repositories served over smart HTTP on 127.0.0.1 (package
	// fuzz/gitserver; needs the git command). ${git.NAME} in a step or a
	// controller's args and env is the clone URL of the one named NAME.
	Git []GitFixture `yaml:"git"`
}

// GitFixture is one repository: a commit of a directory's files.
type GitFixture struct {
	// Name names the repository (${git.NAME}, and NAME.git in its URL).
	Name string `yaml:"name"`
	// Dir is the directory whose files, relative to the target file, make
	// the repository's one commit.
	Dir string `yaml:"dir"`
	// Branch is the commit's branch. Zero: main.
	Branch string `yaml:"branch"`
}

// Faults is the fault scope.
type Faults struct {
	// Space is "realistic-latency" (the faults of "realistic", and
	// ordinary latency: every watch of a client, or of every client, a
	// little late, as a busy apiserver makes them), "realistic" (lag,
	// broken watches, relists after 410, lists from a lagging apiserver,
	// restarts between writes, without ordinary latency: its inputs keep
	// the meaning they had before realistic-latency existed), "latency"
	// (ordinary latency only: what a healthy, busy cluster does, no
	// fault), "composed" (realistic-latency, with faults on a write's
	// answer besides: lost after it was applied, held, refused with 429,
	// 500 or 503; and one of those with one break, relist or restart in
	// the same schedule), "lag" (delay and hold) or "loss" (lag and
	// dropped events, which no real apiserver does). Zero:
	// realistic-latency.
	Space string `yaml:"space"`
	// Resources are the plural resources faults act on. Zero: every
	// controller's Watches.
	Resources []string `yaml:"resources"`
	// Objects are names a fault may be scoped to. Zero: whole resources.
	Objects []string `yaml:"objects"`
	// Scopes maps a resource whose objects do not live in the execution's
	// namespace to where they do: a namespace's name, or "cluster".
	Scopes map[string]string `yaml:"scopes"`
}

// Oracles are the target's judges.
type Oracles struct {
	// Converge names the kind whose objects must reach kstatus Current
	// once the faults are over. Zero: no convergence oracle.
	Converge *Kind `yaml:"converge"`
	// LostUpdates are dotted JSON paths ("data.desired", "spec.replicas")
	// whose acknowledged values must never be replaced by a write whose
	// writer had not seen them. AnyField ("*") judges every field a write
	// sets except those the controllers change in the no-fault reference
	// runs (fuzz.Scenario's LostUpdatesAnyField).
	LostUpdates []string `yaml:"lostUpdates"`
	// Count are count-safety oracles (fuzz.Count): per kind, at no instant
	// more live objects per controller owner than Max, or, with Max zero,
	// than the no-fault reference runs ever had.
	Count []Count `yaml:"count"`
	// EndState are end-state oracles (fuzz.EndState): per kind, a settled
	// run's objects must match two no-fault reference runs where those
	// agree.
	EndState []EndState `yaml:"endState"`
	// Crash: the crash oracle is always on: a controller that exits on
	// its own outside a restart the schedule asked for, or logs a Go
	// panic, is a finding, with its stack. true is accepted and changes
	// nothing; false is refused (a crash is never a harness error).
	Crash *bool `yaml:"crash"`
	// Storm is the storm oracle (fuzz.Scenario's Storm): a run that never
	// settles because, once the faults are over, its controllers' writes
	// get nowhere (409 after 409, failures, writes that change nothing) or
	// set a field back and forth, while the no-fault reference runs
	// settled. Zero (nil): on; false: such a run is a harness error.
	Storm *bool `yaml:"storm"`
	// StaleSelfView is the stale-self-view oracle (fuzz.Scenario's
	// StaleSelfView): a stored write sent from a view older than its
	// writer's own last write to the object, that replaced a value of that
	// own write which no later write restored, is a finding. Every report
	// lists such writes as a likely cause whether or not it is on. Zero
	// (nil): off.
	StaleSelfView *bool `yaml:"staleSelfView"`
	// Quiet is how long nothing must be written for a run to count as
	// settled. Zero: DefaultQuiet.
	Quiet string `yaml:"quiet"`
	// KnownBug marks the target as a known-bad variant (fuzz.Scenario's
	// KnownBug): each committed corpus entry must still find it.
	KnownBug string `yaml:"knownBug"`
	// Known are findings already reported, which campaigns search past
	// (fuzz.Known): an execution whose every violation one of them matches
	// is counted in the campaign's summary, not a finding, and
	// `stalefuzz false-alarms` counts it apart from the false alarms.
	// `stalefuzz replay` and regression runs still judge it as a finding.
	Known []Known `yaml:"known"`
}

// LeaderElection is a controller's leader election as its install has it.
type LeaderElection struct {
	// Lease is the lease duration ("15s", controller-runtime's default).
	// Required.
	Lease string `yaml:"lease"`
	// ReleaseOnCancel says it gives the lease up when stopped gracefully.
	ReleaseOnCancel bool `yaml:"releaseOnCancel"`
	// Source says where this was read (a flag's default, a manifest).
	Source string `yaml:"source"`
}

// Known is a finding already reported.
type Known struct {
	// Oracle is the violation's oracle: convergence, count, crash,
	// end-state, lost-update, stale-self-view, storm or stuck.
	Oracle string `yaml:"oracle"`
	// Message is a substring of the violation's message that only this
	// finding's violations have.
	Message string `yaml:"message"`
	// Why names the finding and where it is reported.
	Why string `yaml:"why"`
	// Subject is a substring of the violation's subject (the object or
	// kind: "StatefulSet prometheus-prom"). Zero: any.
	Subject string `yaml:"subject"`
	// Faults are the kinds of fault the schedule must have, each of them
	// (latency, delay, hold, break, relist, restart, restart-before-answer,
	// lose, reset, slow, reject; none: no fault), for a violation to be
	// this finding: a look-alike with another cause is then reported.
	// Zero: any schedule.
	Faults []string `yaml:"faults"`
	// On are watched resources ("services"), each of which a step of the
	// schedule must be on (a held, delayed or broken watch of it), for a violation to be this finding.
	// Zero: any.
	On []string `yaml:"on"`
}

// knownOracles are the oracles a Known may name: those a target's
// violations come from.
var knownOracles = []string{"convergence", "count", "crash", "end-state", "lost-update", "stale-self-view", "storm", "stuck"}

// DefaultQuiet is a target's Oracles.Quiet when it gives none: longer than
// the engine's default (fuzz.DefaultQuiet, 300 ms), because a target's
// controllers are processes the engine cannot ask whether they have work
// left (an in-process manager has an idle probe), and on a loaded machine a
// restarted operator took more than 300 ms from its watches' sync to its
// first write: KubeRay's truth table, at a load average of 8 to 14, judged
// 3 of its 216 runs mid-reconcile as end-state differences.
const DefaultQuiet = time.Second

// AnyField in Oracles.LostUpdates stands for every field no controller
// changes in the no-fault reference runs.
const AnyField = "*"

// Count is one count-safety oracle.
type Count struct {
	Kind `yaml:",inline"`
	// Max is the most live objects one owner (one group) may have at once.
	// Zero: learned from the reference runs.
	Max int `yaml:"max"`
	// GroupBy counts objects apart by these labels or annotations as well
	// ("label:app", "annotation:cert-manager.io/certificate-revision"):
	// per revision where an owner has several by design
	// (fuzz.Count.GroupBy).
	GroupBy []string `yaml:"groupBy"`
	// AcrossOwners counts every owner's objects together, by GroupBy
	// alone: a Deployment's Pods across its ReplicaSets by their app
	// label, against replicas + maxSurge in Max (fuzz.Count.AcrossOwners).
	AcrossOwners bool `yaml:"acrossOwners"`
}

// EndState is one end-state oracle.
type EndState struct {
	Kind `yaml:",inline"`
	// Ignore are dotted paths never compared (fuzz.EndState.Ignore).
	Ignore []string `yaml:"ignore"`
}

// Kind is an apiVersion and kind.
type Kind struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

// defaultWaitTimeout is Wait.Timeout's zero.
const defaultWaitTimeout = 5 * time.Second
