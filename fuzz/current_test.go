package fuzz

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// hiddenRetry is when the stand-in controller of TestSettleAwaitsCurrent
// writes its StatefulSet's status: after the scenario's quiet period, well
// within the settle budget.
const hiddenRetry = 1200 * time.Millisecond

// statefulSet is a StatefulSet of one replica, as a workload creates it.
func statefulSet(ns, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

// TestSettleAwaitsCurrent, against the real apiserver: a run whose
// StatefulSet's controller writes its status only after a wait the trace
// cannot show (as kube-controller-manager's StatefulSet controller does
// after a sync its stale informer made fail: a rate-limited requeue, no
// request) is quiet for the scenario's Quiet long before that write. With
// the StatefulSet among Scenario.AwaitCurrent's kinds the run settles only
// once it is Current, and is judged then; without, it settled at the quiet
// period and was judged on a StatefulSet with no status. A StatefulSet
// whose status never comes leaves the run unsettled when the settle budget
// runs out (a controller may back off longer than any budget), not
// judged, within the execution's budget, and Result.NotCurrent names it.
func TestSettleAwaitsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	stsGVK := appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	s := Scenario{
		Name:         "await-current",
		Quiet:        300 * time.Millisecond,
		AwaitCurrent: []schema.GroupVersionKind{stsGVK},
		Knobs:        []Knob{{Name: "status", Values: 2}}, // 0: written late; 1: never
		Start:        noop,
		Drive: func(ctx context.Context, x *Exec) error {
			if err := x.Direct.Create(ctx, statefulSet(x.Namespace, "db")); err != nil {
				return err
			}
			if x.Knob("status") == 1 {
				return nil
			}
			// The stand-in controller: straight to the apiserver, not
			// through the proxy and not as the workload, so the trace shows
			// nothing of it until its write.
			cs, err := kubernetes.NewForConfig(x.DirectConfig())
			if err != nil {
				return err
			}
			x.Go("hidden retry", func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Until(x.Mark().Add(hiddenRetry))):
				}
				sts, err := cs.AppsV1().StatefulSets(x.Namespace).Get(ctx, "db", metav1.GetOptions{})
				if err != nil {
					return err
				}
				sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, ReadyReplicas: 1, CurrentReplicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, CurrentRevision: "db-1", UpdateRevision: "db-1"}
				_, err = cs.AppsV1().StatefulSets(x.Namespace).UpdateStatus(ctx, sts, metav1.UpdateOptions{})
				return err
			})
			return nil
		},
		Checks: []Check{{Name: "judged Current", Fn: func(ctx context.Context, x *Exec, _ trace.Trace) error {
			if !x.Settled() {
				return nil // judges a settled run only, as the end-state oracle does
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(stsGVK)
			if err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: "db"}, u); err != nil {
				return err
			}
			r, err := kstatus.Compute(u)
			if err != nil {
				return err
			}
			if r.Status != kstatus.CurrentStatus {
				return fmt.Errorf("StatefulSet db judged %s (%s)", r.Status, r.Message)
			}
			return nil
		}}},
	}
	env := testEnv(t, s)

	res, err := env.Run(context.Background(), Schedule{Knobs: map[string]int{"status": 0}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Settled || len(res.Violations) > 0 || len(res.NotCurrent) > 0 {
		t.Errorf("status written at t+%v: settled %v, violations %v, not Current %v (phases %v); want settled once the StatefulSet was Current, no violation", hiddenRetry, res.Settled, res.Violations, res.NotCurrent, res.Phases)
	}
	if settledAt := res.Phases.Drive + res.Phases.Lag + res.Phases.Settle; settledAt < hiddenRetry {
		t.Errorf("settled at t+%v, before the status write at t+%v", settledAt, hiddenRetry)
	}

	never := Schedule{Knobs: map[string]int{"status": 1}}
	res, err = env.Run(context.Background(), never)
	if err != nil {
		t.Fatal(err)
	}
	if res.Settled || len(res.NotCurrent) != 1 || len(res.Violations) > 0 {
		t.Errorf("status never written: settled %v, not Current %v, violations %v (phases %v); want unsettled at the budget, the StatefulSet named, not judged", res.Settled, res.NotCurrent, res.Violations, res.Phases)
	}
	if !strings.Contains(res.Report(), "never settled: quiet, but not yet kstatus Current when the settle budget ran out: StatefulSet db: InProgress") {
		t.Errorf("status never written: the report does not say the StatefulSet was not Current:\n%s", res.Report())
	}
	// Its budget: Budget, and what the start and settling may take beyond
	// theirs outside a go test -fuzz worker (StartSlack, SettleSlack).
	if budget := Budget + env.extraBudget(never); res.Elapsed > budget {
		t.Errorf("status never written: the execution took %v, over its budget %v", res.Elapsed, budget)
	}
}
