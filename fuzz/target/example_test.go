package target_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/fuzz/truthtable"
)

// A target in Go is the same declaration as a target file: here a
// controller built from a Go module at a pinned version, its CRDs from the
// same module's zip, one object, and the convergence oracle (kstatus).
func Example() {
	t := &target.Target{
		Name: "source-controller",
		Controllers: []target.Controller{{
			Name:         "source",
			Go:           "github.com/fluxcd/source-controller@v1.9.3",
			Args:         []string{"--watch-all-namespaces=false", "--storage-path=/tmp/storage"},
			NamespaceEnv: "RUNTIME_NAMESPACE",
			Watches:      []string{"gitrepositories"},
		}},
		CRDs:     []string{"github.com/fluxcd/source-controller@v1.9.3:config/crd/bases"},
		Workload: []target.Step{{Apply: &target.Apply{File: "gitrepository.yaml"}}},
		Oracles:  target.Oracles{Converge: &target.Kind{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "GitRepository"}},
	}
	_ = t // in a fuzz test: s, err := t.Scenario(); fuzz.Fuzz(f, s)
}

// A controller run in-process (the Go form only): its reconciler registered
// on the manager the engine makes for each execution (and again at each
// restart a fault asks for), the knob "mode" read from the execution.
// scenarios/contention's TestTargetInProcess is a complete one.
func ExampleController() {
	modes := []string{"optimistic", "blind"}
	t := &target.Target{
		Name:   "mirror",
		Scheme: scheme.Scheme, // add your CRDs' Go types to your own
		Controllers: []target.Controller{{
			Name:    "mirror",
			Watches: []string{"configmaps"},
			Setup: func(ctx context.Context, x *fuzz.Exec, mgr manager.Manager) error {
				mode := modes[x.Knob("mode")]
				return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(
					reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
						_ = mode // reconcile req with mgr.GetClient()
						return reconcile.Result{}, nil
					}))
			},
		}},
		Knobs:    []target.Knob{{Name: "mode", Values: modes}},
		Workload: []target.Step{{Apply: &target.Apply{File: "configmap.yaml"}}},
		Oracles:  target.Oracles{LostUpdates: []string{"data.desired"}},
	}
	_ = t // in a fuzz test: s, err := t.Scenario(); fuzz.Fuzz(f, s)
}

// The fuzz target of a target file, as scenarios/pymirror has it.
func ExampleFuzz() {
	_ = func(f *testing.F) { target.Fuzz(f, "target.yaml") }
}

// A finding's regression row: its saved input replayed against the real
// apiserver, the violation asserted (scenarios/kuberay's TestKubeRayTwoHeads
// is one).
func ExampleTarget_Input() {
	_ = func(t *testing.T) {
		tg, env := target.LoadEnv(t, "target.yaml")
		sched, err := tg.Input("testdata/finding.input")
		if err != nil {
			t.Fatal(err)
		}
		res, err := env.Run(context.Background(), sched, fuzz.Retries(3))
		if err != nil {
			t.Fatalf("schedule %s: %v", sched, err)
		}
		if len(res.Violations) == 0 {
			t.Errorf("schedule %s: the finding no longer reproduces\n%s", sched, res.Report())
		}
	}
}

// A target's truth table from Go, as `stalefuzz truth-table` makes it: each
// realistic one-fault pattern at the first two knob settings, twice a cell,
// written as Markdown with the settings named by the file's values.
func ExampleMeasureTruthTable() {
	_ = func(t *testing.T) {
		tg, err := target.Load("target.yaml")
		if err != nil {
			t.Fatal(err)
		}
		tt, err := target.MeasureTruthTable(context.Background(), "target.yaml", truthtable.Options{Runs: 2, Settings: 2}, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("patterns.md", []byte(tt.Markdown(tg.Setting)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Pods that behave like a cluster's: kube-controller-manager's Job
// controller beside the controller under test, and a kubelet stand-in
// whose Pods stay Pending 200 ms and whose first Pod of Job "work" is
// evicted or OOM-killed (the knob "fate" chooses) 300 ms after it runs, an
// apiserver as 1.33 ships it (WatchList off) besides.
func ExampleKubelet() {
	t := &target.Target{
		Name: "jobs",
		Builtins: &target.Builtins{
			Controllers: []string{"job-controller"},
			Watches:     []string{"jobs", "pods"},
			Kubelet: &target.Kubelet{
				PendingFor: "200ms",
				Fates: []target.PodFate{{
					Labels: map[string]string{"batch.kubernetes.io/job-name": "work"},
					Pod:    "1", After: "300ms", Fate: "${fate}",
				}},
			},
		},
		Knobs:     []target.Knob{{Name: "fate", Values: []string{"evicted", "oomKilled"}}},
		Workload:  []target.Step{{Apply: &target.Apply{File: "job.yaml"}}},
		APIServer: target.APIServer{FeatureGates: map[string]bool{"WatchList": false}},
	}
	_ = t // in a fuzz test: s, err := t.Scenario(); fuzz.Fuzz(f, s)
}
