package target

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// namespaceRef, as ${namespace}, is the execution's namespace; dirRef, as
// ${dir}, a controller process's own directory.
const (
	namespaceRef = "namespace"
	dirRef       = "dir"
)

var (
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	knobRE  = regexp.MustCompile(`\$\{([^}]*)\}`)
	// branchRE is a conservative git branch name.
	branchRE = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_./]*$`)
	// kubernetesRelease is a Kubernetes release tag, as hack/kcm-version.sh
	// builds one.
	kubernetesRelease = regexp.MustCompile(`^v1\.[0-9]+\.[0-9]+$`)
)

// Validate checks a Target built in Go; Load runs the same checks with the
// file's lines.
func (t *Target) Validate() error {
	return t.validate(&positions{file: "target " + t.Name})
}

func (t *Target) validate(p *positions) error {
	var errs []error
	bad := func(err error, path ...any) { errs = append(errs, p.at(err, path...)) }
	if !labelRE.MatchString(t.Name) || len(t.Name) > 30 {
		bad(fmt.Errorf("want a name of at most 30 lower-case letters, digits and dashes (it names namespaces and findings), got %q", t.Name), "name")
	}
	if t.Budget != "" {
		if d, err := parseDuration(t.Budget); err != nil || d <= fuzz.Budget || d > fuzz.MaxLong {
			bad(fmt.Errorf("want a duration over %v and at most %v (one execution's budget, for a workflow that must reach a timer its controller cannot shorten), got %q", fuzz.Budget, fuzz.MaxLong, t.Budget), "budget")
		}
	}
	knobs := map[string]Knob{}
	for i, k := range t.Knobs {
		switch {
		case !labelRE.MatchString(k.Name):
			bad(fmt.Errorf("want a knob name of lower-case letters, digits and dashes, got %q", k.Name), "knobs", i, "name")
		case k.Name == namespaceRef:
			bad(fmt.Errorf("%q is taken: ${%s} is the execution's namespace", k.Name, namespaceRef), "knobs", i, "name")
		case k.Name == dirRef:
			bad(fmt.Errorf("%q is taken: ${%s} is a controller process's own directory", k.Name, dirRef), "knobs", i, "name")
		case knobs[k.Name].Name != "":
			bad(fmt.Errorf("knob %q declared twice", k.Name), "knobs", i, "name")
		case len(k.Values) == 0 || len(k.Values) > 256:
			bad(fmt.Errorf("knob %q: want 1 to 256 values, got %d", k.Name, len(k.Values)), "knobs", i, "values")
		}
		knobs[k.Name] = k
	}
	gits := map[string]bool{}
	for i, g := range t.Fixtures.Git {
		switch {
		case !labelRE.MatchString(g.Name):
			bad(fmt.Errorf("want a repository name of lower-case letters, digits and dashes (${git.NAME}), got %q", g.Name), "fixtures", "git", i, "name")
		case gits[g.Name]:
			bad(fmt.Errorf("git fixture %q declared twice", g.Name), "fixtures", "git", i, "name")
		}
		gits[g.Name] = true
		if g.Dir == "" {
			bad(errors.New("want dir: the directory whose files make the repository's commit"), "fixtures", "git", i, "dir")
		}
		if g.Branch != "" && !branchRE.MatchString(g.Branch) {
			bad(fmt.Errorf("want a branch name such as main, got %q", g.Branch), "fixtures", "git", i, "branch")
		}
	}
	// process says that s is a controller's arg or env value, where ${dir}
	// and ${port.NAME} are the process's own.
	process := false
	// refs checks the knob references in s; durations says that every value
	// s can take must parse as a duration.
	refs := func(s string, durations bool, path ...any) {
		for _, m := range knobRE.FindAllStringSubmatch(s, -1) {
			if m[1] == namespaceRef && !durations {
				continue
			}
			if name, ok := strings.CutPrefix(m[1], "git."); ok && !durations {
				if !gits[name] {
					bad(fmt.Errorf("${%s}: no git fixture is named %q: declare it under fixtures.git", m[1], name), path...)
				}
				continue
			}
			if m[1] == dirRef || strings.HasPrefix(m[1], "port.") {
				switch name := strings.TrimPrefix(m[1], "port."); {
				case !process:
					bad(fmt.Errorf("${%s} is a controller process's own: only a controller's args and env may refer to it", m[1]), path...)
				case m[1] != dirRef && !labelRE.MatchString(name):
					bad(fmt.Errorf("${%s}: want ${port.NAME}, NAME of lower-case letters, digits and dashes", m[1]), path...)
				}
				continue
			}
			k, ok := knobs[m[1]]
			if !ok {
				bad(fmt.Errorf("${%s} names no knob (declared: %s): declare it under knobs", m[1], knobNames(t.Knobs)), path...)
				continue
			}
			if durations {
				for _, v := range k.Values {
					if _, err := parseDuration(strings.ReplaceAll(s, m[0], v)); err != nil {
						bad(fmt.Errorf("knob %q's value %q makes %q no duration: %w", k.Name, v, s, err), path...)
					}
				}
			}
		}
		if durations && !knobRE.MatchString(s) {
			if _, err := parseDuration(s); err != nil {
				bad(err, path...)
			}
		}
	}
	if len(t.Controllers) == 0 && (t.Builtins == nil || len(t.Builtins.Controllers) == 0) {
		bad(errors.New("want at least one controller: name and command (any language) or go (module/path/cmd@version); or kube-controller-manager's, under builtins.controllers"), "controllers")
	}
	seen := map[string]bool{}
	for i, c := range t.Controllers {
		switch {
		case !labelRE.MatchString(c.Name):
			bad(fmt.Errorf("want a controller name of lower-case letters, digits and dashes (its proxy client's name), got %q", c.Name), "controllers", i, "name")
		case seen[c.Name]:
			bad(fmt.Errorf("controller %q declared twice", c.Name), "controllers", i, "name")
		case c.Name == ControllerManagerClient:
			bad(fmt.Errorf("%q is the builtins' kube-controller-manager's client: name your controller otherwise", c.Name), "controllers", i, "name")
		case c.Name == SchedulerClient:
			bad(fmt.Errorf("%q is the builtins' kube-scheduler's client: name your controller otherwise", c.Name), "controllers", i, "name")
		}
		seen[c.Name] = true
		if le := c.LeaderElection; le != nil {
			if d, err := parseDuration(le.Lease); err != nil || d <= 0 {
				bad(fmt.Errorf("lease %q: want the lease duration its install has (15s is controller-runtime's default)", le.Lease), "controllers", i, "leaderElection", "lease")
			}
		}
		switch {
		case len(c.Command) == 0 && c.Go == "" && c.Setup == nil:
			bad(errors.New("want command (a command line) or go (module/path/cmd@version)"), "controllers", i)
		case len(c.Command) > 0 && c.Go != "":
			bad(errors.New("both command and go: want one"), "controllers", i, "go")
		case c.Setup != nil && (len(c.Command) > 0 || c.Go != ""):
			bad(errors.New("Setup (in-process) and a command or go: want one"), "controllers", i)
		case c.Go != "" && !validGo(c.Go):
			bad(fmt.Errorf("want module/path/cmd@version or a directory ./dir, got %q", c.Go), "controllers", i, "go")
		}
		for j, p := range c.Patches {
			switch {
			case c.Go == "":
				bad(errors.New("patches apply to a Go controller's modules (go:): edit a command's sources instead"), "controllers", i, "patches", j)
			case p.File == "":
				bad(errors.New("want file: the patch (a unified diff)"), "controllers", i, "patches", j, "file")
			case !fileExists(t.path(p.File)):
				bad(fmt.Errorf("no patch file %s", t.path(p.File)), "controllers", i, "patches", j, "file")
			case p.Module == "" && isLocal(c.Go):
				bad(fmt.Errorf("want module: the module the patch changes (a controller in a directory, %s, is built from its own sources: edit them, or patch a module it requires)", c.Go), "controllers", i, "patches", j, "module")
			case p.Module != "" && module.CheckPath(p.Module) != nil:
				bad(fmt.Errorf("module %q: %w", p.Module, module.CheckPath(p.Module)), "controllers", i, "patches", j, "module")
			}
		}
		if c.Kubeconfig.Env != "" && c.Kubeconfig.Flag != "" {
			bad(errors.New("both env and flag: want one"), "controllers", i, "kubeconfig")
		}
		if c.Kubeconfig.Flag != "" && !strings.HasPrefix(c.Kubeconfig.Flag, "-") {
			bad(fmt.Errorf("want a flag such as --kubeconfig, got %q", c.Kubeconfig.Flag), "controllers", i, "kubeconfig", "flag")
		}
		if c.Replicas < 0 || c.Replicas > 4 {
			bad(fmt.Errorf("want 0 to 4 replicas (0 means 1), got %d", c.Replicas), "controllers", i, "replicas")
		}
		process = true
		for j, a := range c.Args {
			refs(a, false, "controllers", i, "args", j)
		}
		for k, v := range c.Env {
			refs(v, false, "controllers", i, "env", k)
		}
		process = false
	}
	if b := t.Builtins; b != nil {
		if b.ControllerManager != "" {
			m, v, _ := strings.Cut(b.ControllerManager, "@")
			if m != ControllerManagerModule || !kubernetesRelease.MatchString(v) {
				bad(fmt.Errorf("want %s@v1.Y.Z (a Kubernetes release), got %q", ControllerManagerModule, b.ControllerManager), "builtins", "controllerManager")
			} else if len(b.Controllers) == 0 {
				bad(errors.New("a kube-controller-manager release without controllers: name the kube-controller-manager controllers to run"), "builtins", "controllerManager")
			}
		}
		for i, c := range b.Controllers {
			if !labelRE.MatchString(c) && !strings.HasPrefix(c, "-") {
				bad(fmt.Errorf("want a kube-controller-manager controller name such as job or replicaset, got %q", c), "builtins", "controllers", i)
			}
		}
		for i, f := range b.Flags {
			refs(f, false, "builtins", "flags", i)
		}
		if len(b.Watches) > 0 && len(b.Controllers) == 0 {
			bad(errors.New("watches without controllers: name the kube-controller-manager controllers to run"), "builtins", "watches")
		}
		if k := b.Kubelet; k != nil {
			for _, d := range []struct{ v, name string }{{k.SucceedAfter, "succeedAfter"}, {k.PendingFor, "pendingFor"}, {k.RestartBackOff, "restartBackOff"}} {
				if d.v != "" {
					refs(d.v, true, "builtins", "kubelet", d.name)
				}
			}
			for i, f := range k.Fates {
				refs(f.Fate, false, "builtins", "kubelet", "fates", i, "fate")
				for _, v := range knobValues(t.Knobs, f.Fate) {
					if !slices.Contains(PodFates, v) {
						bad(fmt.Errorf("want a fate of %s (or a knob whose values are), got %q", strings.Join(PodFates, ", "), v), "builtins", "kubelet", "fates", i, "fate")
						break
					}
				}
				if f.After == "" {
					bad(errors.New("want how long after the Pod runs its fate comes (a duration such as 2s, or a knob)"), "builtins", "kubelet", "fates", i, "after")
				} else {
					refs(f.After, true, "builtins", "kubelet", "fates", i, "after")
				}
				for key, v := range f.Labels {
					if errs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(v)...); len(errs) > 0 {
						bad(fmt.Errorf("label %s=%s: %s", key, v, strings.Join(errs, "; ")), "builtins", "kubelet", "fates", i, "labels")
					}
				}
				refs(f.Pod, false, "builtins", "kubelet", "fates", i, "pod")
				for _, v := range knobValues(t.Knobs, f.Pod) {
					if n, err := strconv.Atoi(v); err != nil || n < 0 {
						bad(fmt.Errorf("want which Pod, a number from 1 (0: none), or a knob whose values are; got %q", v), "builtins", "kubelet", "fates", i, "pod")
						break
					}
				}
			}
		}
	}
	for name := range t.APIServer.FeatureGates {
		if !gateRE.MatchString(name) {
			bad(fmt.Errorf("want a kube-apiserver feature gate's name such as WatchList, got %q", name), "apiserver", "featureGates", name)
		}
	}
	for i, crd := range t.CRDs {
		if mod, path, ok := strings.Cut(crd, ":"); ok && (!validGo(mod) || path == "") {
			bad(fmt.Errorf("want a file, a directory or module@version:path, got %q", crd), "crds", i)
		}
	}
	if len(t.Workload) == 0 {
		bad(errors.New("want at least one step: apply, patch, delete or wait"), "workload")
	}
	joined := map[string]bool{}
	for i, s := range t.Workload {
		t.validateStep(s, func(err error, path ...any) { bad(err, append([]any{"workload", i}, path...)...) },
			func(v string, d bool, path ...any) { refs(v, d, append([]any{"workload", i}, path...)...) })
		if s.Node != nil {
			validateNodeStep(*s.Node, joined, func(err error, path ...any) { bad(err, append([]any{"workload", i, "node"}, path...)...) })
		}
	}
	if t.Oracles.Crash != nil && !*t.Oracles.Crash {
		bad(errors.New("the crash oracle cannot be turned off: a controller that exits on its own or panics is always a finding (remove this line)"), "oracles", "crash")
	}
	switch t.Faults.Space {
	case "", "lag", "realistic", "realistic-latency", "latency", "composed", "loss":
	default:
		bad(fmt.Errorf("want realistic-latency, composed, realistic, latency, lag or loss, got %q", t.Faults.Space), "faults", "space")
	}
	for res, where := range t.Faults.Scopes {
		if where != "cluster" && !labelRE.MatchString(where) {
			bad(fmt.Errorf("resource %q: want \"cluster\" or a namespace's name, got %q", res, where), "faults", "scopes", res)
		}
	}
	if c := t.Oracles.Converge; c != nil && (c.APIVersion == "" || c.Kind == "") {
		bad(errors.New("want apiVersion and kind"), "oracles", "converge")
	}
	for i, c := range t.Oracles.Count {
		if c.APIVersion == "" || c.Kind.Kind == "" || c.Max < 0 {
			bad(errors.New("want apiVersion, kind and a max of 0 (learned from the reference runs) or more"), "oracles", "count", i)
		}
	}
	for i, c := range t.Oracles.Count {
		for j, g := range c.GroupBy {
			if name, ok := strings.CutPrefix(g, "label:"); !ok || name == "" {
				if name, ok = strings.CutPrefix(g, "annotation:"); !ok || name == "" {
					bad(fmt.Errorf("groupBy %q: want label:KEY or annotation:KEY", g), "oracles", "count", i, "groupBy", j)
				}
			}
		}
		if c.AcrossOwners && len(c.GroupBy) == 0 {
			bad(errors.New("acrossOwners needs groupBy: the labels or annotations that tell which objects count together"), "oracles", "count", i)
		}
	}
	for i, k := range t.Oracles.EndState {
		if k.APIVersion == "" || k.Kind.Kind == "" {
			bad(errors.New("want apiVersion and kind"), "oracles", "endState", i)
		}
	}
	for i, k := range t.Oracles.Known {
		switch {
		case !slices.Contains(knownOracles, k.Oracle):
			bad(fmt.Errorf("oracle %q: want one of %s", k.Oracle, strings.Join(knownOracles, ", ")), "oracles", "known", i)
		case k.Message == "":
			bad(errors.New("want a message: a substring of the finding's violations that only they have"), "oracles", "known", i)
		case k.Why == "":
			bad(errors.New("want why: the finding and where it is reported"), "oracles", "known", i)
		}
		for j, f := range k.Faults {
			if !slices.Contains(fuzz.FaultKinds, f) {
				bad(fmt.Errorf("fault %q: want one of %s", f, strings.Join(fuzz.FaultKinds, ", ")), "oracles", "known", i, "faults", j)
			}
		}
		for j, r := range k.On {
			if res := t.resources(); !slices.Contains(res, r) {
				bad(fmt.Errorf("resource %q: want one the faults are on: %s", r, strings.Join(res, ", ")), "oracles", "known", i, "on", j)
			}
		}
	}
	if q := t.Oracles.Quiet; q != "" {
		if _, err := parseDuration(q); err != nil {
			bad(err, "oracles", "quiet")
		}
	}
	return errors.Join(errs...)
}

func (t *Target) validateStep(s Step, bad func(error, ...any), refs func(string, bool, ...any)) {
	n := 0
	for _, set := range []bool{s.Apply != nil, s.Patch != nil, s.Delete != nil, s.Wait != nil, s.Node != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		bad(fmt.Errorf("want exactly one of apply, patch, delete, wait and node, got %d", n))
		return
	}
	if s.At != "" {
		refs(s.At, true, "at")
	}
	object := func(o Object, field string) {
		if o.APIVersion == "" || o.Kind == "" || o.Name == "" {
			bad(errors.New("want apiVersion, kind and name"), field)
		}
		refs(o.Name, false, field, "name")
	}
	switch {
	case s.Apply != nil:
		if (s.Apply.File == "") == (s.Apply.Manifest == "") {
			bad(errors.New("want file or manifest"), "apply")
		}
		refs(s.Apply.Manifest, false, "apply", "manifest")
	case s.Patch != nil:
		object(s.Patch.Object, "patch")
		if !slices.Contains([]string{"", "merge", "json", "apply"}, s.Patch.Type) {
			bad(fmt.Errorf("want merge, json or apply, got %q", s.Patch.Type), "patch", "type")
		}
		if !slices.Contains([]string{"", "status"}, s.Patch.Subresource) {
			bad(fmt.Errorf("want status or nothing, got %q", s.Patch.Subresource), "patch", "subresource")
		}
		if s.Patch.Patch == "" {
			bad(errors.New("want the patch's body"), "patch", "patch")
		}
		refs(s.Patch.Patch, false, "patch", "patch")
	case s.Delete != nil:
		object(*s.Delete, "delete")
	case s.Wait != nil:
		object(s.Wait.Object, "wait")
		if s.Wait.Value != "" && s.Wait.JSONPath == "" {
			bad(errors.New("value without jsonPath: say where the value is (jsonPath: '{.status.phase}')"), "wait", "value")
		}
		if s.Wait.ValueFrom != "" && (s.Wait.JSONPath == "" || s.Wait.Value != "") {
			bad(errors.New("valueFrom wants jsonPath and no value: the value at jsonPath is compared with the value at valueFrom"), "wait", "valueFrom")
		}
		if s.Wait.Current && s.Wait.JSONPath != "" {
			bad(errors.New("current and jsonPath: want one (current waits for kstatus Current, jsonPath for a value)"), "wait", "current")
		}
		refs(s.Wait.Value, false, "wait", "value")
		if s.Wait.Timeout != "" {
			budget := max(fuzz.Budget, t.Long())
			if d, err := parseDuration(s.Wait.Timeout); err != nil || d > budget-2*time.Second {
				bad(fmt.Errorf("want a duration up to %v (an execution lasts at most %v: the target's budget, 8s unless it sets one), got %q", budget-2*time.Second, budget, s.Wait.Timeout), "wait", "timeout")
			}
		}
	}
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 500ms or 2s, got %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("want a duration of zero or more, got %q", s)
	}
	return d, nil
}

// validGo says whether s looks like path@version.
func validGo(s string) bool {
	if isLocal(s) {
		return !strings.ContainsAny(s, "@ \t")
	}
	path, version, ok := strings.Cut(s, "@")
	return ok && path != "" && version != "" && !strings.ContainsAny(s, " \t")
}

func knobNames(ks []Knob) string {
	if len(ks) == 0 {
		return "none"
	}
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

// knobValues is s with each knob reference replaced by each of the knob's
// values in turn (one reference at most is expanded; s itself when it
// has none).
func knobValues(knobs []Knob, s string) []string {
	m := knobRE.FindStringSubmatch(s)
	if m == nil {
		return []string{s}
	}
	for _, k := range knobs {
		if k.Name == m[1] {
			var out []string
			for _, v := range k.Values {
				out = append(out, strings.ReplaceAll(s, m[0], v))
			}
			return out
		}
	}
	return nil // an unknown knob: refs says so
}

// gateRE is the form of a feature gate's name.
var gateRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// validateNodeStep checks one node step against the Nodes the steps before
// it joined (joined, which it updates).
func validateNodeStep(n NodeStep, joined map[string]bool, bad func(error, ...any)) {
	set := 0
	name, field := "", ""
	for _, f := range []struct{ field, v string }{{"join", n.Join}, {"stop", n.Stop}, {"resume", n.Resume}, {"leave", n.Leave}} {
		if f.v != "" {
			set++
			name, field = f.v, f.field
		}
	}
	if set != 1 {
		bad(fmt.Errorf("want exactly one of join, stop, resume and leave, each the Node's name, got %d", set))
		return
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		bad(fmt.Errorf("node name %q: %s", name, strings.Join(errs, "; ")), field)
	}
	if n.Zone != "" && field != "join" {
		bad(errors.New("zone goes with join only: a Node's zone is set when it joins"), "zone")
	}
	if errs := validation.IsValidLabelValue(n.Zone); n.Zone != "" && len(errs) > 0 {
		bad(fmt.Errorf("zone %q is not a label value: %s", n.Zone, strings.Join(errs, "; ")), "zone")
	}
	switch {
	case field == "join" && joined[name]:
		bad(fmt.Errorf("node %s already joined in an earlier step: join each name once", name), field)
	case field == "join":
		joined[name] = true
	case !joined[name]:
		bad(fmt.Errorf("node %s: no earlier step joins it (add a step with node: {join: %s})", name, name), field)
	}
}
