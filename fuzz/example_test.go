package fuzz_test

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
)

// A Go scenario's Drive that paces its workflow on what the controller
// did: it waits up to 2 s for the controller's child, then edits the
// parent. When the wait gives up, the edit lands on a state the no-fault
// reference runs never had, so the run says so (Exec.Diverged) and its
// end state is not compared with theirs; its other oracles still judge it.
func ExampleExec_Diverged() {
	drive := func(ctx context.Context, x *fuzz.Exec) error {
		parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "p"}}
		if err := x.Direct.Create(ctx, parent); err != nil {
			return err
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: "p-child"}, &corev1.ConfigMap{})
			return err == nil, client.IgnoreNotFound(err)
		})
		switch {
		case wait.Interrupted(err) && ctx.Err() == nil: // the 2 s were up
			x.Diverged("the wait for ConfigMap p-child gave up after 2s")
		case err != nil:
			return err
		}
		parent.Data = map[string]string{"edited": "yes"}
		return x.Direct.Update(ctx, parent)
	}
	_ = fuzz.Scenario{Name: "parent-child", Clients: []string{"ctl"}, Resources: []string{"configmaps"}, Drive: drive}
}
