package contention

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write is how the reconciler writes status.
type Write int

const (
	// Blind writes status with a plain MergeFrom patch: no resourceVersion,
	// so a write based on a stale read silently wins.
	Blind Write = iota
	// Optimistic writes with MergeFromWithOptimisticLock: a write based on a
	// stale read gets 409 Conflict.
	Optimistic
	// BlindReadYourWrites writes as Blind, from a manager whose client has
	// controller-runtime v0.25's experimental read-your-writes consistency
	// (client.CacheOptions.EnableReadYourWritesConsistency): a read from
	// the cache waits until the cache has seen every write of this client
	// that started before it.
	BlindReadYourWrites
)

func (w Write) String() string {
	switch w {
	case Optimistic:
		return "optimistic"
	case BlindReadYourWrites:
		return "blind-ryw"
	}
	return "blind"
}

// StepInterval is how long the controller waits between plan steps.
const StepInterval = 50 * time.Millisecond

// Reconciler builds a Rollout's plan once and advances it step by step.
type Reconciler struct {
	client.Client
	Write Write
}

// Reconcile does one thing per call: build the plan if there is none, else
// advance it by one step, else mark the Rollout Ready.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ro := &Rollout{}
	if err := r.Get(ctx, req.NamespacedName, ro); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := ro.DeepCopy()
	switch p := ro.Status.Plan; {
	case p == nil:
		ro.Status.Plan = &Plan{ID: newID(), Steps: ro.Spec.Steps}
		meta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Planned", Message: "plan " + ro.Status.Plan.ID})
	case p.Done < p.Steps:
		p.Done++
		meta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", Message: fmt.Sprintf("step %d/%d of plan %s", p.Done, p.Steps, p.ID)})
	case ro.Status.ObservedGeneration != ro.Generation || !meta.IsStatusConditionTrue(ro.Status.Conditions, "Ready"):
		meta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Complete", Message: "plan " + p.ID + " done"})
		ro.Status.ObservedGeneration = ro.Generation
	default:
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(base) // Blind and BlindReadYourWrites
	if r.Write == Optimistic {
		patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Status().Patch(ctx, ro, patch); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil // someone else wrote first: re-read and decide again
		}
		return ctrl.Result{}, fmt.Errorf("unable to patch status of rollout %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{RequeueAfter: StepInterval}, nil
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&Rollout{}).Named("rollout").Complete(r)
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
