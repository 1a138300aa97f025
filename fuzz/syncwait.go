package fuzz

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncWaitCache is controller-runtime's cache with one change: its waits for
// sync are told the moment an informer (and every event handler added to
// one) has synced, through client-go's DoneCheckers, instead of polling
// every 100 ms (client-go's WaitForCacheSync). controller-runtime waits
// three times in a row before a controller starts its workers (the
// informer, the cache, the handler), so a manager started 200 ms after its
// watch had synced; with an execution of a quarter of a second, that was
// most of it. What the controller lists, watches, sees and writes is
// unchanged: only its start is no longer rounded up to the poll.
type syncWaitCache struct {
	cache.Cache

	started  atomic.Bool
	mu       sync.Mutex
	checkers []toolscache.DoneChecker // every informer and handler handed out
}

func newSyncWaitCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &syncWaitCache{Cache: c}, nil
}

// GetInformer gets the informer without controller-runtime's polling wait
// and, unless told not to block, waits for its sync itself.
func (c *syncWaitCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	block := blocks(opts)
	i, err := c.Cache.GetInformer(ctx, obj, append(opts, cache.BlockUntilSynced(false))...)
	return c.informer(ctx, i, block, err)
}

// GetInformerForKind is GetInformer by kind.
func (c *syncWaitCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	block := blocks(opts)
	i, err := c.Cache.GetInformerForKind(ctx, gvk, append(opts, cache.BlockUntilSynced(false))...)
	return c.informer(ctx, i, block, err)
}

func (c *syncWaitCache) informer(ctx context.Context, i cache.Informer, block bool, err error) (cache.Informer, error) {
	if err != nil {
		return nil, err
	}
	c.track(i.HasSyncedChecker())
	// Blocking is meant for a started cache: before Start nothing syncs,
	// and controller-runtime's own Get does not wait either.
	if block && c.started.Load() && !toolscache.WaitFor(ctx, "", i.HasSyncedChecker()) {
		return nil, ctx.Err()
	}
	return &syncWaitInformer{Informer: i, c: c}, nil
}

// WaitForCacheSync waits, without polling, for every informer and handler
// handed out to have synced, then asks the cache (which now finds them
// synced at its first look).
func (c *syncWaitCache) WaitForCacheSync(ctx context.Context) bool {
	c.mu.Lock()
	checkers := append([]toolscache.DoneChecker(nil), c.checkers...)
	c.mu.Unlock()
	return toolscache.WaitFor(ctx, "", checkers...) && c.Cache.WaitForCacheSync(ctx)
}

func (c *syncWaitCache) track(d toolscache.DoneChecker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkers = append(c.checkers, d)
}

// Start starts the cache. From here on a blocking GetInformer waits for
// the informer's sync; before, like controller-runtime's, it does not (the
// informers sync only once the cache runs).
func (c *syncWaitCache) Start(ctx context.Context) error {
	c.started.Store(true)
	return c.Cache.Start(ctx)
}

// syncWaitInformer tracks the handlers added to an informer, so that the
// cache's WaitForCacheSync also waits until each has had its initial events.
type syncWaitInformer struct {
	cache.Informer
	c *syncWaitCache
}

func (i *syncWaitInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.tracked(i.Informer.AddEventHandler(h))
}

func (i *syncWaitInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, p time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.tracked(i.Informer.AddEventHandlerWithResyncPeriod(h, p))
}

func (i *syncWaitInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.tracked(i.Informer.AddEventHandlerWithOptions(h, o))
}

func (i *syncWaitInformer) tracked(r toolscache.ResourceEventHandlerRegistration, err error) (toolscache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		i.c.track(r.HasSyncedChecker())
	}
	return r, err
}

func blocks(opts []cache.InformerGetOption) bool {
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.BlockUntilSynced == nil || *o.BlockUntilSynced
}
