package target_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

const good = `name: demo
controllers:
  - name: ctl
    command: [python3, ctl.py]
    env: {MODE: "${mode}"}
    args: ["--watch-namespace=${namespace}"]
    watches: [configmaps]
knobs:
  - name: mode
    values: [a, b]
  - name: edit
    values: [0s, 500ms]
workload:
  - apply:
      manifest: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: x}
  - at: ${edit}
    patch: {apiVersion: v1, kind: ConfigMap, name: x, patch: '{"data":{"a":"b"}}'}
oracles:
  lostUpdates: [data.a]
`

// TestParseLeaderElection: a controller's leader election as deployed
// reaches the scenario, for every replica's client.
func TestParseLeaderElection(t *testing.T) {
	src := strings.Replace(good, "    watches: [configmaps]", "    watches: [configmaps]\n    replicas: 2\n    leaderElection: {lease: 15s, source: manager.yaml}", 1)
	tg, err := target.Parse("good.yaml", t.TempDir(), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"ctl-0", "ctl-1"} {
		if le := s.LeaderElection[c]; le.LeaseDuration != 15*time.Second || le.ReleaseOnCancel || le.Source != "manager.yaml" {
			t.Errorf("client %s: %+v", c, le)
		}
	}
}

// TestParseFixtureRefs: a controller's args refer to a git fixture, its own
// directory and its own ports; a step refers to the fixture.
func TestParseFixtureRefs(t *testing.T) {
	src := strings.Replace(good, `"--watch-namespace=${namespace}"`, `"--url=${git.repo}", "--storage=${dir}/s", "--addr=127.0.0.1:${port.metrics}"`, 1)
	src = strings.Replace(src, `'{"data":{"a":"b"}}'`, `'{"data":{"a":"${git.repo}"}}'`, 1)
	src = strings.Replace(src, "oracles:", "fixtures:\n  git: [{name: repo, dir: repo}]\noracles:", 1)
	tg, err := target.Parse("good.yaml", "/dir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if g := tg.Fixtures.Git; len(g) != 1 || g[0].Name != "repo" || g[0].Dir != "repo" {
		t.Errorf("fixtures.git parsed as %+v", g)
	}
}

func TestParseGood(t *testing.T) {
	tg, err := target.Parse("good.yaml", "/dir", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tg.Clients(), ","); got != "ctl" {
		t.Errorf("clients: got %q, want ctl", got)
	}
	if tg.Dir != "/dir" || tg.Workload[1].Patch.Name != "x" || tg.Workload[1].At != "${edit}" {
		t.Errorf("parsed wrongly: %+v", tg)
	}
	k, err := target.Parse("good.yaml", "/dir", []byte(good+"  known: [{oracle: lost-update, message: data.a, why: issue 7, subject: ConfigMap x, faults: [relist]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []target.Known{{Oracle: "lost-update", Message: "data.a", Why: "issue 7", Subject: "ConfigMap x", Faults: []string{"relist"}}}; !reflect.DeepEqual(k.Oracles.Known, want) {
		t.Errorf("oracles.known: got %+v, want %+v", k.Oracles.Known, want)
	}
}

// TestParseBudget: a target with a budget has long executions, and waits
// up to the budget less 2 s.
func TestParseBudget(t *testing.T) {
	src := strings.Replace(good, "oracles:", "  - wait: {apiVersion: v1, kind: ConfigMap, name: x, timeout: 18s}\nbudget: 20s\noracles:", 1)
	tg, err := target.Parse("good.yaml", "/dir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if tg.Long() != 20*time.Second {
		t.Errorf("Long() = %v, want the budget, 20s", tg.Long())
	}
	if g, err := target.Parse("good.yaml", "/dir", []byte(good)); err != nil || g.Long() != 0 {
		t.Errorf("a target without a budget: Long() = %v (%v), want 0", g.Long(), err)
	}
}

// TestParseErrors: each mistake is refused with its line, its field and,
// where there is one, a suggestion.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, old, new string
		want           []string // substrings of the error
	}{
		{"typo in a field", "    command: [python3", "    comand: [python3", []string{"bad.yaml:4:", `field "comand" not known in Controller: did you mean "command"?`}},
		{"undeclared knob", `"${mode}"`, `"${mood}"`, []string{"bad.yaml:5:", "controllers[0].env.MODE", "${mood} names no knob (declared: mode, edit)"}},
		{"knob that is no duration", "  - at: ${edit}", "  - at: ${mode}", []string{"bad.yaml:19:", "workload[1].at", `knob "mode"'s value "a" makes "${mode}" no duration`}},
		{"two actions", "  - at: ${edit}\n", "  - delete: {apiVersion: v1, kind: ConfigMap, name: x}\n    at: ${edit}\n", []string{"workload[1]", "want exactly one of apply, patch, delete, wait and node, got 2"}},
		{"bad subresource", `name: x, patch:`, `name: x, subresource: scale, patch:`, []string{"bad.yaml:20:", "workload[1].patch.subresource", `want status or nothing, got "scale"`}},
		{"no command", "    command: [python3, ctl.py]\n", "", []string{"bad.yaml:3:", "controllers[0]", "want command (a command line) or go"}},
		{"bad space", "oracles:", "faults: {space: chaos}\noracles:", []string{"bad.yaml:21:", "faults.space", "want realistic-latency, composed, realistic, latency, lag or loss"}},
		{"knob named namespace", "  - name: edit", "  - name: namespace", []string{"bad.yaml:11:", `"namespace" is taken: ${namespace} is the execution's namespace`}},
		{"not YAML", "name: demo", "name: [demo", []string{"bad.yaml:", "not valid YAML"}},
		{"wrong kind of value", "    watches: [configmaps]", "    watches: configmaps", []string{"bad.yaml:7:", "cannot unmarshal !!str `configmaps` into []string"}},
		{"undeclared git fixture", `"--watch-namespace=${namespace}"`, `"--url=${git.repo}"`, []string{"bad.yaml:6:", "controllers[0].args[0]", `no git fixture is named "repo": declare it under fixtures.git`}},
		{"a process's own directory in a step", `'{"data":{"a":"b"}}'`, `'{"data":{"a":"${dir}"}}'`, []string{"bad.yaml:20:", "workload[1].patch", "${dir} is a controller process's own: only a controller's args and env may refer to it"}},
		{"bad port name", `"--watch-namespace=${namespace}"`, `"--addr=:${port.Metrics}"`, []string{"bad.yaml:6:", "${port.Metrics}: want ${port.NAME}"}},
		{"known finding of no oracle", "  lostUpdates: [data.a]", "  lostUpdates: [data.a]\n  known: [{oracle: lost-updates, message: x, why: y}]", []string{"bad.yaml:23:", "oracles.known[0]", `oracle "lost-updates": want one of convergence, count, crash, end-state, lost-update, stale-self-view, storm, stuck`}},
		{"a lease that is no duration", "    watches: [configmaps]", "    watches: [configmaps]\n    leaderElection: {lease: 15}", []string{"bad.yaml:8:", "controllers[0].leaderElection.lease", `lease "15": want the lease duration`}},
		{"a count grouped by nothing known", "  lostUpdates: [data.a]", "  lostUpdates: [data.a]\n  count: [{apiVersion: v1, kind: Pod, groupBy: [app]}]", []string{"bad.yaml:23:", "oracles.count[0].groupBy[0]", `groupBy "app": want label:KEY or annotation:KEY`}},
		{"a count across owners without groups", "  lostUpdates: [data.a]", "  lostUpdates: [data.a]\n  count: [{apiVersion: v1, kind: Pod, acrossOwners: true}]", []string{"bad.yaml:23:", "oracles.count[0]", "acrossOwners needs groupBy"}},
		{"known finding of an unknown fault", "  lostUpdates: [data.a]", "  lostUpdates: [data.a]\n  known: [{oracle: lost-update, message: x, why: y, faults: [restrat]}]", []string{"bad.yaml:23:", "oracles.known[0].faults[0]", `fault "restrat": want one of latency, delay, hold`}},
		{"known finding without why", "  lostUpdates: [data.a]", "  lostUpdates: [data.a]\n  known:\n    - {oracle: lost-update, message: x}", []string{"bad.yaml:24:", "oracles.known[0]", "want why"}},
		{"controller named as the scheduler", "  - name: ctl", "  - name: kube-scheduler", []string{"bad.yaml:3:", "controllers[0].name", `"kube-scheduler" is the builtins' kube-scheduler's client`}},
		{"git fixture without dir", "oracles:", "fixtures:\n  git: [{name: repo}]\noracles:", []string{"bad.yaml:22:", "fixtures.git[0].dir", "want dir"}},
		{"bad feature gate", "oracles:", "apiserver: {featureGates: {watch-list: false}}\noracles:", []string{"bad.yaml:", "apiserver.featureGates.watch-list", `want a kube-apiserver feature gate's name such as WatchList, got "watch-list"`}},
		{"a budget within 8s", "name: demo", "name: demo\nbudget: 5s", []string{"bad.yaml:", "budget", `want a duration over 8s and at most 10m0s`, `got "5s"`}},
		{"a wait over 6s without a budget", "oracles:", "  - wait: {apiVersion: v1, kind: ConfigMap, name: x, timeout: 7s}\noracles:", []string{"wait.timeout", "want a duration up to 6s (an execution lasts at most 8s"}},
		{"known finding on an unwatched resource", "  lostUpdates: [data.a]", "  lostUpdates: [data.a]\n  known:\n    - {oracle: lost-update, message: x, why: y, on: [secrets]}", []string{"oracles.known[0].on[0]", `resource "secrets": want one the faults are on`}},
		{"a wait's valueFrom with a value", "oracles:", "  - wait: {apiVersion: v1, kind: ConfigMap, name: x, jsonPath: '{.data.a}', value: b, valueFrom: '{.data.c}'}\noracles:", []string{"wait.valueFrom", "valueFrom wants jsonPath and no value"}},
		{"a wait longer than the budget allows", "oracles:", "  - wait: {apiVersion: v1, kind: ConfigMap, name: x, timeout: 19s}\nbudget: 20s\noracles:", []string{"wait.timeout", "want a duration up to 18s (an execution lasts at most 20s"}},
		{"unknown pod fate", "oracles:", "builtins:\n  kubelet:\n    fates: [{pod: \"1\", after: 1s, fate: crashed}]\noracles:", []string{"bad.yaml:", "builtins.kubelet.fates[0].fate", `want a fate of failed, oomKilled, succeeded, evicted (or a knob whose values are), got "crashed"`}},
		{"pod fate knob of other values", "oracles:", "builtins:\n  kubelet:\n    fates: [{pod: \"1\", after: 1s, fate: \"${mode}\"}]\noracles:", []string{"builtins.kubelet.fates[0].fate", `got "a"`}},
		{"pod fate of no pod", "oracles:", "builtins:\n  kubelet:\n    fates: [{pod: first, after: 1s, fate: failed}]\noracles:", []string{"builtins.kubelet.fates[0].pod", `want which Pod, a number from 1 (0: none), or a knob whose values are; got "first"`}},
		{"pod fate without after", "oracles:", "builtins:\n  kubelet:\n    fates: [{pod: \"1\", fate: failed}]\noracles:", []string{"builtins.kubelet.fates[0].after", "want how long after the Pod runs"}},
		{"kube-controller-manager of no release", "oracles:", "builtins:\n  controllers: [job]\n  controllerManager: k8s.io/kubernetes@1.35\noracles:", []string{"bad.yaml:", "builtins.controllerManager", `want k8s.io/kubernetes@v1.Y.Z (a Kubernetes release), got "k8s.io/kubernetes@1.35"`}},
		{"kube-controller-manager release without controllers", "oracles:", "builtins:\n  controllerManager: k8s.io/kubernetes@v1.35.4\noracles:", []string{"builtins.controllerManager", "a kube-controller-manager release without controllers"}},
		{"pending that is no duration", "oracles:", "builtins:\n  kubelet: {pendingFor: soon}\noracles:", []string{"builtins.kubelet.pendingFor", `want a duration such as 500ms or 2s, got "soon"`}},
		{"node stopped before it joined", "  - at: ${edit}\n", "  - node: {stop: n1}\n  - at: ${edit}\n", []string{"bad.yaml:", "workload[1].node.stop", "node n1: no earlier step joins it (add a step with node: {join: n1})"}},
		{"node joined twice", "  - at: ${edit}\n", "  - node: {join: n1}\n  - node: {join: n1}\n  - at: ${edit}\n", []string{"workload[2].node.join", "node n1 already joined in an earlier step"}},
		{"node step of two actions", "  - at: ${edit}\n", "  - node: {join: n1, leave: n1}\n  - at: ${edit}\n", []string{"workload[1].node", "want exactly one of join, stop, resume and leave, each the Node's name, got 2"}},
		{"zone given to a stop", "  - at: ${edit}\n", "  - node: {join: n1}\n  - node: {stop: n1, zone: a}\n  - at: ${edit}\n", []string{"workload[2].node.zone", "zone goes with join only"}},
		{"node name no DNS name", "  - at: ${edit}\n", "  - node: {join: N_1}\n  - at: ${edit}\n", []string{"workload[1].node.join", `node name "N_1"`}},
		{"pod fate of a bad label", "oracles:", "builtins:\n  kubelet:\n    fates: [{pod: \"1\", after: 1s, fate: failed, labels: {\"a b\": x}}]\noracles:", []string{"builtins.kubelet.fates[0].labels", "label a b=x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(good, c.old, c.new, 1)
			if src == good {
				t.Fatalf("the case does not change the file: %q not found", c.old)
			}
			_, err := target.Parse("bad.yaml", "/dir", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			var te *target.Error
			if !errors.As(err, &te) {
				t.Errorf("error %v is no *target.Error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestValidateSetup: an in-process controller (Controller.Setup, the Go
// form's) is a controller of its own, and one with a command too is
// refused.
func TestValidateSetup(t *testing.T) {
	tg, err := target.Parse("good.yaml", "/dir", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	setup := func(context.Context, *fuzz.Exec, manager.Manager) error { return nil }
	tg.Controllers[0].Command, tg.Controllers[0].Setup = nil, setup
	if err := tg.Validate(); err != nil {
		t.Errorf("an in-process controller refused: %v", err)
	}
	tg.Controllers[0].Command = []string{"python3", "ctl.py"}
	if err := tg.Validate(); err == nil || !strings.Contains(err.Error(), "Setup (in-process) and a command or go: want one") {
		t.Errorf("Setup and a command: got %v, want an error naming both", err)
	}
}
