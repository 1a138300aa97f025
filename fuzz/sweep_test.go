package fuzz

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSweepRemovesWhatAnExecutionLeft: an execution's namespace and every
// object in it are gone once Run returns, finalizers and all, so that a
// long campaign does not grow etcd by a namespace an execution.
func TestSweepRemovesWhatAnExecutionLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	s := Scenario{Name: "sweep", Start: noop, Drive: func(ctx context.Context, x *Exec) error {
		for _, o := range []client.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "held", Finalizers: []string{"stalefuzz.dev/hold"}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "s"}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "sa"}},
		} {
			if err := x.Direct.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SweepErr != nil {
		t.Fatalf("sweep of %s: %v", res.Namespace, res.SweepErr)
	}
	ctx := context.Background()
	var ns corev1.Namespace
	if err := env.direct.Get(ctx, client.ObjectKey{Name: res.Namespace}, &ns); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after its execution: got %v (phase %s, finalizers %v), want it gone", res.Namespace, err, ns.Status.Phase, ns.Spec.Finalizers)
	}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceAccountList{}} {
		if err := env.direct.List(ctx, list, client.InNamespace(res.Namespace)); err != nil {
			t.Fatal(err)
		}
		if n := len(mustItems(t, list)); n > 0 {
			t.Errorf("%T in %s after its execution: %d left, want none", list, res.Namespace, n)
		}
	}
	t.Logf("sweep took %v", res.Phases.Sweep)
}

func mustItems(t *testing.T, list client.ObjectList) []any {
	t.Helper()
	switch l := list.(type) {
	case *corev1.ConfigMapList:
		return toAny(l.Items)
	case *corev1.SecretList:
		return toAny(l.Items)
	case *corev1.ServiceAccountList:
		return toAny(l.Items)
	}
	t.Fatalf("unexpected list %T", list)
	return nil
}

func toAny[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i := range xs {
		out[i] = xs[i]
	}
	return out
}
