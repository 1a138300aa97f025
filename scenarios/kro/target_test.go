package kro_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// FuzzKRO searches faults a real cluster produces for KRO, as
// `stalefuzz fuzz target.yaml` does.
func FuzzKRO(f *testing.F) { target.Fuzz(f, "target.yaml") }

// children are the ConfigMaps the RGD declares for the instance "chain".
var children = []string{"chain-first", "chain-second"}

// endState is the scenario's own oracle: what the apiserver holds once the
// execution settled, before the sweep. An instance that exists and is not
// being deleted must have both children; one being deleted must not be (a
// finalizer left after the run settled); one gone must have left no child
// behind.
func endState(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
	var cms corev1.ConfigMapList
	if err := x.Direct.List(ctx, &cms, client.InNamespace(x.Namespace)); err != nil {
		return &fuzz.HarnessError{Err: fmt.Errorf("unable to list ConfigMaps: %w", err)}
	}
	have := map[string]bool{}
	for _, cm := range cms.Items {
		if slices.Contains(children, cm.Name) {
			have[cm.Name] = true
		}
	}
	left := slices.Sorted(maps.Keys(have))
	inst := &unstructured.Unstructured{}
	inst.SetAPIVersion("kro.run/v1alpha1")
	inst.SetKind("Chain")
	err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: "chain"}, inst)
	switch {
	case apierrors.IsNotFound(err):
		if len(left) > 0 {
			return fmt.Errorf("instance chain deleted, but its children %v are left behind", left)
		}
	case err != nil:
		return &fuzz.HarnessError{Err: fmt.Errorf("unable to get the instance: %w", err)}
	case inst.GetDeletionTimestamp() != nil:
		return fmt.Errorf("instance chain still deleting at the end (finalizers %v), children left %v", inst.GetFinalizers(), left)
	default:
		var missing []string
		for _, c := range children {
			if !have[c] {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("instance chain present, but children %v missing", missing)
		}
	}
	return nil
}

// env starts an Env for target.yaml with endState among its checks; keep
// drops the workload's last step (the instance's delete).
func env(t *testing.T, keep bool) *fuzz.Env {
	t.Helper()
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if keep {
		tg.Workload = tg.Workload[:len(tg.Workload)-1]
	}
	if err := target.Prepare(context.Background(), tg, os.Stderr); err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	s.Checks = append(s.Checks, fuzz.Check{Name: "end-state", Fn: endState})
	e, err := fuzz.NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// summary is what one run did: writes per client, verb and resource,
// violations, phase times and the controllers' log.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %s: namespace %s, elapsed %v, settled %v\n", sched, res.Namespace, res.Elapsed, res.Settled)
	fmt.Fprintf(&b, "phases: %s\n", res.Phases)
	writes := map[string]int{}
	var cms []string
	for _, r := range res.Trace.Requests {
		if r.DryRun {
			continue
		}
		switch r.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			rs := r.Resource
			if r.Subresource != "" {
				rs += "/" + r.Subresource
			}
			writes[fmt.Sprintf("%s %s %s %d", r.Client, r.Verb, rs, r.Code)]++
			if r.Resource == "configmaps" || r.Resource == "chains" {
				cms = append(cms, fmt.Sprintf("%s %s %s/%s %s %d", r.Start.Sub(res.Mark).Round(time.Millisecond), r.Verb, rs, r.Name, r.Client, r.Code))
			}
		}
	}
	fmt.Fprintf(&b, "writes (client verb resource code: count):\n")
	for _, k := range slices.Sorted(maps.Keys(writes)) {
		fmt.Fprintf(&b, "  %s: %d\n", k, writes[k])
	}
	fmt.Fprintf(&b, "writes to chains and configmaps, after the mark:\n  %s\n", strings.Join(cms, "\n  "))
	fmt.Fprintf(&b, "violations: %d\n", len(res.Violations))
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "  %s: %s\n", v.Oracle, v.Message)
	}
	fmt.Fprintf(&b, "controllers' log:\n")
	_ = res.Logs.WriteTo(&b, res.Mark)
	return b.String()
}

// TestKRO runs KRO without faults: the instance kept, and deleted at each
// value of the knob at.
func TestKRO(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			e := env(t, keep)
			for at := range 2 {
				if keep && at > 0 {
					break
				}
				sched := fuzz.Schedule{Knobs: map[string]int{"at": at}}
				res, err := e.Run(context.Background(), sched, fuzz.Retries(3))
				if err != nil {
					t.Fatalf("schedule %s: %v", sched, err)
				}
				t.Logf("%s", summary(sched, res))
				if len(res.Violations) > 0 {
					t.Errorf("schedule %s: violations %v", sched, res.Violations)
				}
			}
		})
	}
}

var _ = proxy.Freeze
