package fuzz

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// currentInterval is how often a run that is otherwise settled reads its
// Scenario.AwaitCurrent objects again.
const currentInterval = 50 * time.Millisecond

// notCurrent names the objects of Scenario.AwaitCurrent's kinds in
// namespace ns that kstatus says are not done yet (InProgress or
// Terminating), each with kstatus' message. An object kstatus cannot read,
// or a kind that cannot be listed, is not waited for: the wait must never
// keep a run from settling for a reason of its own.
func (e *Env) notCurrent(ctx context.Context, ns string) []string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var out []string
	for _, gvk := range e.s.AwaitCurrent {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := e.direct.List(ctx, list, client.InNamespace(ns)); err != nil {
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			r, err := kstatus.Compute(o)
			if err != nil {
				continue
			}
			if r.Status == kstatus.InProgressStatus || r.Status == kstatus.TerminatingStatus {
				out = append(out, fmt.Sprintf("%s %s: %s (%s)", gvk.Kind, o.GetName(), r.Status, r.Message))
			}
		}
	}
	return out
}
