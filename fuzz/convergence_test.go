package fuzz

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// widgetGVK is the kind of widgetsCRD.
var widgetGVK = schema.GroupVersionKind{Group: "convergence.stalefuzz.dev", Version: "v1", Kind: "Widget"}

// widgetsCRD serves Widgets with a status subresource and no schema: the
// convergence tests write each Widget's status themselves, as the
// controller under test would.
func widgetsCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: widgetGVK.Kind, ListKind: widgetGVK.Kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgetGVK.Version, Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// widget is one Widget the workload creates, the status it then writes, and
// whether it then changes the spec (generation 2, a status of generation 1).
type widget struct {
	name   string
	status map[string]any
	bump   bool
}

func condition(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2026-11-24T12:00:00Z"}
}

// widgets covers what each convergence judgement tells apart.
var widgets = []widget{
	// No Ready condition, no other condition, its generation observed.
	{name: "idle", status: map[string]any{"observedGeneration": int64(1)}},
	{name: "ready", status: map[string]any{"observedGeneration": int64(1), "conditions": []any{condition("Ready", "True", "Succeeded", "all done")}}},
	// Its spec changed after the status was written.
	{name: "behind", status: map[string]any{"observedGeneration": int64(1), "conditions": []any{condition("Ready", "True", "Succeeded", "all done")}}, bump: true},
	{name: "reconciling", status: map[string]any{"observedGeneration": int64(1), "conditions": []any{condition("Reconciling", "True", "Progressing", "rolling out 2 of 3")}}},
	{name: "stalled", status: map[string]any{"observedGeneration": int64(1), "conditions": []any{condition("Stalled", "True", "QuotaExceeded", "no quota for 3 replicas")}}},
}

// driveWidgets creates every widget side by side, each with its status
// written through the status subresource.
func driveWidgets(ctx context.Context, x *Exec) error {
	var g errgroup.Group
	for _, w := range widgets {
		g.Go(func() error {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
			u.SetGroupVersionKind(widgetGVK)
			u.SetNamespace(x.Namespace)
			u.SetName(w.name)
			if err := x.Direct.Create(ctx, u); err != nil {
				return fmt.Errorf("unable to create Widget %q: %w", w.name, err)
			}
			u.Object["status"] = w.status
			if err := x.Direct.Status().Update(ctx, u); err != nil {
				return fmt.Errorf("unable to update the status of Widget %q: %w", w.name, err)
			}
			if !w.bump {
				return nil
			}
			u.Object["spec"] = map[string]any{"size": int64(2)}
			if err := x.Direct.Update(ctx, u); err != nil {
				return fmt.Errorf("unable to update Widget %q: %w", w.name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// TestConvergenceJudgesEachObject: the convergence oracle judges each
// Widget the workload wrote, against the real apiserver, once the run
// settled (no controller runs, so every Widget that has not converged is
// stuck). With KStatus, kstatus judges: a Widget without a Ready condition
// whose generation is observed has converged, one whose observedGeneration
// is behind or with condition Reconciling=True or Stalled=True has not, and
// the verdict names the object, kstatus' status, message and reason.
// Without it, condition Ready=True is still required, in the messages
// committed findings were written with.
func TestConvergenceJudgesEachObject(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	for _, tc := range []struct {
		name    string
		kstatus bool
		want    map[string]string // stuck Widget → its problems; every other Widget converged
	}{{
		name:    "kstatus",
		kstatus: true,
		want: map[string]string{
			"behind":      `want kstatus Current, got InProgress: "Widget generation is 2, but latest observed generation is 1" (Reconciling=True, reason LatestGenerationNotObserved); observedGeneration 1, generation 2`,
			"reconciling": `want kstatus Current, got InProgress: "rolling out 2 of 3" (Reconciling=True, reason Progressing); observedGeneration 1, generation 1`,
			"stalled":     `want kstatus Current, got Failed: "no quota for 3 replicas" (Stalled=True, reason QuotaExceeded); observedGeneration 1, generation 1`,
		},
	}, {
		name: "ready condition",
		want: map[string]string{
			"idle":        "want condition Ready=True, got none",
			"behind":      "want observedGeneration 2, got 1",
			"reconciling": "want condition Ready=True, got none",
			"stalled":     "want condition Ready=True, got none",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Scenario{
				Name:     "converge-" + strings.ReplaceAll(tc.name, " ", "-"),
				CRDs:     []*apiextensionsv1.CustomResourceDefinition{widgetsCRD()},
				Start:    noop,
				Drive:    driveWidgets,
				Converge: &Convergence{GVK: widgetGVK, KStatus: tc.kstatus},
			}
			env := testEnv(t, s)
			res, err := env.Run(context.Background(), Schedule{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Settled {
				t.Fatalf("a run without controllers never settled: %+v", res.Violations)
			}
			got := map[string]string{}
			for _, v := range res.Violations {
				if v.Oracle != "stuck" {
					t.Errorf("violation of %s, want stuck only: %s", v.Oracle, v.Message)
					continue
				}
				got[strings.TrimPrefix(v.Subject, "Widget "+res.Namespace+"/")] = v.Message
			}
			for _, w := range widgets {
				want, stuck := tc.want[w.name]
				msg, violated := got[w.name]
				switch {
				case stuck && !violated:
					t.Errorf("Widget %s: converged, want stuck: %s", w.name, want)
				case !stuck && violated:
					t.Errorf("Widget %s: want converged, got %s", w.name, msg)
				case stuck:
					full := fmt.Sprintf("Widget %s/%s: settled (lag over, no writes, nothing held) but not converged: %s", res.Namespace, w.name, want)
					if msg != full {
						t.Errorf("Widget %s:\n got %s\nwant %s", w.name, msg, full)
					}
				}
			}
			if res.Converged {
				t.Error("Result.Converged with stuck Widgets")
			}
		})
	}
}

// An object whose status kstatus cannot read cannot be judged: an error
// naming what kstatus could not read, which makes the run a harness error
// (Env.convergence), never a verdict.
func TestKStatusCannotReadIsAnError(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"observedGeneration": int64(1), "conditions": "Ready"}}}
	u.SetGroupVersionKind(widgetGVK)
	u.SetGeneration(1)
	problems, err := (&Convergence{GVK: widgetGVK, KStatus: true}).problems(u)
	if err == nil || !strings.Contains(err.Error(), "kstatus cannot compute its status") {
		t.Fatalf("conditions that are not a list: got problems %q and error %v, want kstatus' error", problems, err)
	}
}

// TestSettlesAfterALateWorkloadStep: a run without faults whose workload's
// last step comes at t+1.5 s (Exec.After) settles the scenario's quiet
// period after it, against the real apiserver: the settle budget counts
// from the workload's end as well as from the lag's. (It used to count from
// the lag's end alone, t+0 without faults, so such a run never settled and
// the no-fault reference runs of that knob setting taught the learned
// oracles nothing.)
func TestSettlesAfterALateWorkloadStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	s := Scenario{
		Name:  "late-step",
		Quiet: time.Second,
		Start: noop,
		Drive: func(ctx context.Context, x *Exec) error {
			x.After(1500*time.Millisecond, "late write", func(ctx context.Context) error {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "late"}}
				return x.Direct.Create(ctx, cm)
			})
			return nil
		},
	}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Settled {
		t.Fatalf("a run whose last workload step came at t+1.5 s never settled (phases %v)", res.Phases)
	}
	if res.Elapsed < 2500*time.Millisecond {
		t.Errorf("settled after %v: want the quiet period (1 s) after the step at t+1.5 s", res.Elapsed)
	}
}

// RunUntil stops at the first run done accepts, and runs no more than it
// is given.
func TestRunUntil(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env := testEnv(t, Scenario{Name: "run-until", Quiet: 100 * time.Millisecond, Start: noop, Drive: noop})
	calls := 0
	second := func(*Result) bool { calls++; return calls == 2 }
	if res, runs, err := env.RunUntil(context.Background(), Schedule{}, 5, second); err != nil || res == nil || runs != 2 || calls != 2 {
		t.Errorf("until the second: %d runs, %d calls, %v; want 2 runs and 2 calls", runs, calls, err)
	}
	calls = 0
	never := func(*Result) bool { calls++; return false }
	if _, runs, err := env.RunUntil(context.Background(), Schedule{}, 3, never); err != nil || runs != 3 || calls != 3 {
		t.Errorf("never: %d runs, %d calls, %v; want 3 and 3", runs, calls, err)
	}
}
