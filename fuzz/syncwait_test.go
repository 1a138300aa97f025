package fuzz

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
)

// TestSyncWaitCacheWaitsForInformersAndHandlers: the cache that StartManager
// gives a manager reports synced only once every informer it handed out and
// every handler added to one has synced, and a blocking GetInformer on a
// started cache returns only a synced informer. (A cancelled context ends a
// wait that has not finished, so nothing here depends on timing.)
func TestSyncWaitCacheWaitsForInformersAndHandlers(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	unsynced := &lateHandlers{FakeInformer: controllertest.NewFakeInformer(), handlers: make(chan struct{})}
	c := &syncWaitCache{Cache: &informertest.FakeInformers{InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{gvk: unsynced}}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	// Before Start, a blocking GetInformer returns at once, as
	// controller-runtime's does: nothing syncs before the cache runs.
	i, err := c.GetInformer(cancelled, &corev1.ConfigMap{})
	if err != nil {
		t.Fatalf("GetInformer before Start: %v", err)
	}
	if _, err := i.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	if c.WaitForCacheSync(cancelled) {
		t.Fatal("WaitForCacheSync reported synced while the informer and its handler had not synced")
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(cancelled, &corev1.ConfigMap{}); err == nil {
		t.Fatal("a blocking GetInformer on a started cache returned an informer that had not synced")
	}
	if _, err := c.GetInformerForKind(cancelled, gvk); err == nil {
		t.Fatal("a blocking GetInformerForKind on a started cache returned an informer that had not synced")
	}

	unsynced.Synced()
	if c.WaitForCacheSync(cancelled) {
		t.Fatal("WaitForCacheSync reported synced while a handler had not had its initial events")
	}
	close(unsynced.handlers)
	if !c.WaitForCacheSync(context.Background()) {
		t.Fatal("WaitForCacheSync reported not synced after the informer synced")
	}
	if _, err := c.GetInformer(context.Background(), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("GetInformer of a synced informer: %v", err)
	}
}

// lateHandlers is an informer whose handlers sync only when handlers is
// closed, after the informer itself.
type lateHandlers struct {
	*controllertest.FakeInformer
	handlers chan struct{}
}

func (l *lateHandlers) AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return lateRegistration{l.handlers}, nil
}

type lateRegistration struct{ done chan struct{} }

func (r lateRegistration) HasSynced() bool                          { return toolscache.IsDone(r) }
func (r lateRegistration) HasSyncedChecker() toolscache.DoneChecker { return r }
func (r lateRegistration) Name() string                             { return "late handler" }
func (r lateRegistration) Done() <-chan struct{}                    { return r.done }
