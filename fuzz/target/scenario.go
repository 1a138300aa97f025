package target

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// Clients lists the proxy clients of the target's controllers, in order: a
// controller's name, or name-0, name-1, ... for its replicas.
func (t *Target) Clients() []string {
	var out []string
	for _, c := range t.Controllers {
		out = append(out, c.clients()...)
	}
	if t.Builtins != nil && len(t.Builtins.Controllers) > 0 {
		out = append(out, ControllerManagerClient)
	}
	if t.Builtins != nil && t.Builtins.Scheduler {
		out = append(out, SchedulerClient)
	}
	return out
}

func (c Controller) clients() []string {
	if c.Replicas <= 1 {
		return []string{c.Name}
	}
	var out []string
	for i := range c.Replicas {
		out = append(out, c.Name+"-"+strconv.Itoa(i))
	}
	return out
}

// Scenario is the target as the engine runs it. It resolves the CRDs and the
// controllers' binaries (which Prepare must have built) and reads the
// workload's files; an error names the field and the fix.
func (t *Target) Scenario() (fuzz.Scenario, error) {
	if err := t.Validate(); err != nil {
		return fuzz.Scenario{}, err
	}
	s := fuzz.Scenario{
		Name:                t.Name,
		Scheme:              t.Scheme,
		Clients:             t.Clients(),
		Resources:           t.resources(),
		Objects:             t.Faults.Objects,
		LostUpdates:         slices.DeleteFunc(slices.Clone(t.Oracles.LostUpdates), func(p string) bool { return p == AnyField }),
		LostUpdatesAnyField: slices.Contains(t.Oracles.LostUpdates, AnyField),
		KnownBug:            t.Oracles.KnownBug,
		Known:               known(t.Oracles.Known),
		LeaderElection:      t.leaderElection(),
		Storm:               t.Oracles.Storm == nil || *t.Oracles.Storm,
		StaleSelfView:       t.Oracles.StaleSelfView != nil && *t.Oracles.StaleSelfView,

		APIServerFeatureGates: t.APIServer.FeatureGates,
	}
	if len(s.Resources) == 0 {
		return s, fmt.Errorf("target %s: no resource to fault: list the resources under faults.resources, or each controller's watches", t.Name)
	}
	c := t.codec()
	s.Space, s.Bounds, s.Knobs, s.Long = c.Space, c.Bounds, c.Knobs, c.Long
	if len(t.Faults.Scopes) > 0 {
		s.Scopes = map[string]string{}
		for res, where := range t.Faults.Scopes {
			if where == "cluster" {
				where = fuzz.Cluster
			}
			s.Scopes[res] = where
		}
	}
	if t.Builtins != nil {
		s.AwaitCurrent = t.Builtins.awaitCurrent()
	}
	s.Quiet = DefaultQuiet
	if t.Oracles.Quiet != "" {
		s.Quiet, _ = parseDuration(t.Oracles.Quiet) // validated
	}
	if c := t.Oracles.Converge; c != nil {
		gv, err := schema.ParseGroupVersion(c.APIVersion)
		if err != nil {
			return s, fmt.Errorf("target %s: oracles.converge.apiVersion %q: %w", t.Name, c.APIVersion, err)
		}
		s.Converge = &fuzz.Convergence{GVK: gv.WithKind(c.Kind), KStatus: true}
	}
	for i, c := range t.Oracles.Count {
		gv, err := schema.ParseGroupVersion(c.APIVersion)
		if err != nil {
			return s, fmt.Errorf("target %s: oracles.count[%d].apiVersion %q: %w", t.Name, i, c.APIVersion, err)
		}
		s.Counts = append(s.Counts, fuzz.Count{GVK: gv.WithKind(c.Kind.Kind), Max: c.Max, GroupBy: c.GroupBy, AcrossOwners: c.AcrossOwners})
	}
	for i, k := range t.Oracles.EndState {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil {
			return s, fmt.Errorf("target %s: oracles.endState[%d].apiVersion %q: %w", t.Name, i, k.APIVersion, err)
		}
		s.EndStates = append(s.EndStates, fuzz.EndState{GVK: gv.WithKind(k.Kind.Kind), Ignore: k.Ignore})
	}
	crds, err := t.readCRDs()
	if err != nil {
		return s, err
	}
	s.CRDs = crds
	if len(t.Fixtures.Git) > 0 {
		if err := t.checkFixtures(); err != nil {
			return s, err
		}
		s.Setup = t.setupFixtures
	}
	procs, err := t.processes()
	if err != nil {
		return s, err
	}
	steps, err := t.steps()
	if err != nil {
		return s, err
	}
	// The workload's cluster-scoped objects are removed after each
	// execution, as its namespace is.
	s.Sweep = kinds(steps)
	s.Start = func(ctx context.Context, x *fuzz.Exec) error { return t.start(ctx, x, procs) }
	missed := &missedWaits{}
	if slices.ContainsFunc(steps, func(s step) bool { return s.Wait != nil && s.Wait.Required }) {
		s.Checks = append(s.Checks, missed.stuckOracle())
	}
	s.Drive = func(ctx context.Context, x *fuzz.Exec) error {
		if err := t.startKubelet(ctx, x); err != nil {
			return err
		}
		missed.track(x)
		x.After(0, "workload", func(ctx context.Context) error { return runSteps(ctx, x, t.Knobs, steps, missed) })
		return nil
	}
	return s, nil
}

// codec is the part of the target's scenario that decodes its inputs:
// its names (clients, resources, objects, knobs), space and bounds. It
// needs nothing built.
func (t *Target) codec() fuzz.Scenario {
	s := fuzz.Scenario{Name: t.Name, Clients: t.Clients(), Resources: t.resources(), Objects: t.Faults.Objects}
	switch t.Faults.Space {
	case "lag":
		s.Space = fuzz.LagOnly
	case "loss":
		s.Space = fuzz.LagAndLoss
	case "realistic":
		s.Space, s.Bounds = fuzz.Realistic, realisticBounds
	case "latency":
		s.Space, s.Bounds = fuzz.OrdinaryLatency, realisticBounds
	case "composed":
		s.Space, s.Bounds = fuzz.Composed, realisticBounds
	default:
		s.Space, s.Bounds = fuzz.RealisticLatency, realisticBounds
	}
	for _, k := range t.Knobs {
		s.Knobs = append(s.Knobs, fuzz.Knob{Name: k.Name, Values: len(k.Values)})
	}
	if s.Long = t.Long(); s.Long > 0 {
		s.Bounds = longBounds(s.Bounds, s.Space, s.Long)
	}
	return s
}

// longBounds are bounds stretched over a long budget (Target.Budget): the
// windows reach as far as half of what the budget leaves after the start,
// drive, settle and stop budgets and what a fault sets off (client-go's
// relist backoff, then the lag), so that the workflow's timers still fit
// after the last fault (a hold of the Job's events until t+34 s of a 40 s
// budget, then the Job controller's 10 s back-off, overran it); a window
// may start until that end less the part of base's range after its latest
// start, and last as long as it. The delay stays base's.
func longBounds(base fuzz.Bounds, space fuzz.Space, budget time.Duration) fuzz.Bounds {
	b := base
	if b == (fuzz.Bounds{}) {
		b = fuzz.DefaultBounds
	}
	lag := budget - fuzz.StartBudget - fuzz.DriveBudget - fuzz.SettleBudget - fuzz.StopBudget
	allowance := b.MaxDelay + 100*time.Millisecond
	if space == fuzz.Realistic || space == fuzz.RealisticLatency || space == fuzz.Composed {
		allowance += max(fuzz.RelistBackoff, fuzz.RestartBudget)
	}
	end := (lag - allowance) / 2
	return fuzz.Bounds{MaxStart: end - (b.MaxLagEnd - b.MaxStart), MaxLength: end, MaxLagEnd: end, MaxDelay: b.MaxDelay}
}

// EncodeText is the input of the target for a schedule in words
// (fuzz.Scenario.ParseSchedule: what a report's "schedule:" line says), a
// knob's value given by index or by the file's name for it ("write=blind"),
// and the schedule it decodes to (fuzz.Scenario.EncodeText). Nothing needs
// to be built.
func (t *Target) EncodeText(text string) ([]byte, fuzz.Schedule, error) {
	if err := t.Validate(); err != nil {
		return nil, fuzz.Schedule{}, err
	}
	parts := strings.Split(text, ";")
	for i, p := range parts {
		name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || strings.Contains(name, " ") {
			continue
		}
		for _, k := range t.Knobs {
			if k.Name != name {
				continue
			}
			if v := slices.Index(k.Values, value); v >= 0 {
				parts[i] = fmt.Sprintf("%s=%d", name, v)
			} else if _, err := strconv.Atoi(value); err != nil {
				return nil, fuzz.Schedule{}, fmt.Errorf("target %s: knob %s has no value %q (its values: %s)", t.Name, name, value, strings.Join(k.Values, ", "))
			}
		}
	}
	b, sched, err := t.codec().EncodeText(strings.Join(parts, ";"))
	if err != nil {
		return nil, sched, fmt.Errorf("target %s: %w", t.Name, err)
	}
	return b, sched, nil
}

// realisticBounds fit the Realistic space's faults and what they set off
// (a relist's backoff, a restart) in an execution's budget.
var realisticBounds = fuzz.Bounds{MaxStart: time.Second, MaxLength: 2100 * time.Millisecond, MaxLagEnd: 2100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}

// resources are Faults.Resources, or every controller's Watches.
func (t *Target) resources() []string {
	if len(t.Faults.Resources) > 0 {
		return t.Faults.Resources
	}
	var out []string
	watches := [][]string{}
	for _, c := range t.Controllers {
		watches = append(watches, c.Watches)
	}
	if t.Builtins != nil {
		watches = append(watches, t.Builtins.Watches)
	}
	for _, ws := range watches {
		for _, r := range ws {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

func (t *Target) path(p string) string {
	if filepath.IsAbs(p) || t.Dir == "" {
		return p
	}
	return filepath.Join(t.Dir, p)
}

// crdPaths resolves CRDs: files and directories against Dir, module paths
// in the module cache.
func (t *Target) crdPaths() ([]string, error) {
	var out []string
	for i, crd := range t.CRDs {
		p := t.path(crd)
		if mod, sub, ok := strings.Cut(crd, ":"); ok {
			dir, err := moduleDir(context.Background(), mod)
			if err != nil {
				return nil, fmt.Errorf("target %s: crds[%d]: %w", t.Name, i, err)
			}
			p = filepath.Join(dir, sub)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("target %s: crds[%d] %q: %w", t.Name, i, crd, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// readCRDs reads every CRD that CRDs name. A label or annotation whose key
// or value holds a Helm template expression ("{{ .Release.Name }}": a
// chart's CRD sources, as cert-manager shipped them up to v1.15) is left
// out: Helm fills it in at install time, it says nothing about the schema,
// and the apiserver refuses it as it stands.
func (t *Target) readCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := t.crdPaths()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for i, p := range paths {
		o := envtest.CRDInstallOptions{Paths: []string{p}, ErrorIfPathMissing: true}
		if err := envtest.ReadCRDFiles(&o); err != nil {
			return nil, fmt.Errorf("target %s: crds[%d]: unable to read the CRDs in %s (a file with Helm template lines such as {{- if ... }} must be rendered first: helm template, then name the rendered file): %w", t.Name, i, p, err)
		}
		for _, crd := range o.CRDs {
			crd.Labels = withoutTemplates(crd.Labels)
			crd.Annotations = withoutTemplates(crd.Annotations)
		}
		out = append(out, o.CRDs...)
	}
	return out, nil
}

// withoutTemplates is m without the entries that hold a Helm template
// expression.
func withoutTemplates(m map[string]string) map[string]string {
	maps.DeleteFunc(m, func(k, v string) bool { return strings.Contains(k, "{{") || strings.Contains(v, "{{") })
	return m
}

// process is how to start one controller: its binary and what Start adds.
type process struct {
	c    Controller
	path string
}

func (t *Target) processes() ([]process, error) {
	var out []process
	for i, c := range t.Controllers {
		var path string
		switch {
		case c.Setup != nil:
			// in-process: no binary
		case c.Go != "":
			p, err := t.binary(c)
			if err != nil {
				return nil, fmt.Errorf("target %s: controllers[%d] %s: %w", t.Name, i, c.Name, err)
			}
			path = p
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("target %s: controllers[%d] %s: %s is not built yet (run 'stalefuzz prepare' on the target file, or 'stalefuzz fuzz', which prepares first): %w", t.Name, i, c.Name, c.Go, err)
			}
		case strings.Contains(c.Command[0], "/"):
			path = t.path(c.Command[0])
		default:
			p, err := exec.LookPath(c.Command[0])
			if err != nil {
				return nil, fmt.Errorf("target %s: controllers[%d] %s: command %q: %w", t.Name, i, c.Name, c.Command[0], err)
			}
			path = p
		}
		out = append(out, process{c: c, path: path})
	}
	return out, nil
}

// start runs every controller replica as its own client and waits for the
// watches it declares.
func (t *Target) start(ctx context.Context, x *fuzz.Exec, procs []process) error {
	if err := t.startBuiltins(ctx, x); err != nil {
		return err
	}
	for _, p := range procs {
		for _, client := range p.c.clients() {
			if setup := p.c.Setup; setup != nil {
				if err := x.StartManager(ctx, client, func(mgr manager.Manager) error { return setup(ctx, x, mgr) }); err != nil {
					return fmt.Errorf("unable to start controller %s: %w", client, err)
				}
				continue
			}
			kubeconfig, err := x.Kubeconfig(client)
			if err != nil {
				return err
			}
			pv, err := newProcVars(x, client, p.c)
			if err != nil {
				return fmt.Errorf("unable to start controller %s: %w", client, err)
			}
			args := []string{p.path}
			if len(p.c.Command) > 1 {
				args = append(args, p.c.Command[1:]...)
			}
			for _, a := range p.c.Args {
				args = append(args, expand(x, t.Knobs, pv, a))
			}
			env := os.Environ()
			for k, v := range p.c.Env {
				env = append(env, k+"="+expand(x, t.Knobs, pv, v))
			}
			switch {
			case p.c.Kubeconfig.Flag != "":
				args = append(args, p.c.Kubeconfig.Flag+"="+kubeconfig)
			case p.c.Kubeconfig.Env != "":
				env = append(env, p.c.Kubeconfig.Env+"="+kubeconfig)
			default:
				env = append(env, "KUBECONFIG="+kubeconfig)
			}
			if p.c.NamespaceEnv != "" {
				env = append(env, p.c.NamespaceEnv+"="+x.Namespace)
			}
			cmd := &exec.Cmd{Path: p.path, Args: args, Env: env, Dir: t.Dir}
			if err := x.Command(client, cmd); err != nil {
				return fmt.Errorf("unable to start controller %s: %w", client, err)
			}
		}
	}
	for _, p := range procs {
		for _, client := range p.c.clients() {
			for _, res := range p.c.Watches {
				if err := x.WaitForWatch(ctx, client, res); err != nil {
					return fmt.Errorf("controller %s never synced its watch of %s: %w", client, res, err)
				}
			}
		}
	}
	return nil
}

// substitute replaces each ${knob} in s by the value chosen for it,
// ${namespace} by the execution's namespace and ${git.NAME} by the git
// fixture's URL.
func substitute(x *fuzz.Exec, knobs []Knob, s string) string { return expand(x, knobs, nil, s) }

// expand is substitute, and for a controller process (pv not nil) ${dir}
// and ${port.NAME} as well.
func expand(x *fuzz.Exec, knobs []Knob, pv *procVars, s string) string {
	return knobRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		switch {
		case name == namespaceRef:
			return x.Namespace
		case strings.HasPrefix(name, "git."):
			if f, ok := x.Fixture().(*fixtures); ok {
				if u, ok := f.git[strings.TrimPrefix(name, "git.")]; ok {
					return u
				}
			}
		case pv != nil && name == dirRef:
			return pv.dir
		case pv != nil && strings.HasPrefix(name, "port."):
			if port, ok := pv.ports[strings.TrimPrefix(name, "port.")]; ok {
				return strconv.Itoa(port)
			}
		}
		for _, k := range knobs {
			if k.Name == name {
				return k.Values[x.Knob(name)%len(k.Values)]
			}
		}
		return ref // validated: unreachable
	})
}

// errTimeout is wrapped by a wait step that timed out.
var errTimeout = errors.New("timed out")

// sleepUntil waits until t or ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// leaderElection is each controller's leader election as deployed, by
// client (every replica's).
func (t *Target) leaderElection() map[string]fuzz.LeaderElection {
	out := map[string]fuzz.LeaderElection{}
	for _, c := range t.Controllers {
		if c.LeaderElection == nil {
			continue
		}
		d, _ := parseDuration(c.LeaderElection.Lease) // validated
		for _, client := range c.clients() {
			out[client] = fuzz.LeaderElection{LeaseDuration: d, ReleaseOnCancel: c.LeaderElection.ReleaseOnCancel, Source: c.LeaderElection.Source}
		}
	}
	return out
}

func known(ks []Known) []fuzz.Known {
	var out []fuzz.Known
	for _, k := range ks {
		out = append(out, fuzz.Known{Oracle: k.Oracle, Message: k.Message, Why: k.Why, Subject: k.Subject, Faults: k.Faults, On: k.On})
	}
	return out
}
