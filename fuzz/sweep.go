package fuzz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// SweepBudget bounds the removal of what one execution left in the
// apiserver, after its controllers have stopped. A namespace not swept
// within it is swept again before the next execution's.
const SweepBudget = 1500 * time.Millisecond

// sweepers is how many resources a sweep lists at once.
const sweepers = 8

// sweeper removes what executions leave in the apiserver, so that a long
// campaign's etcd and watch caches do not grow with every execution (a
// namespace and its objects each). envtest runs no namespace controller
// and no garbage collector, and once an execution's controllers are
// stopped nothing removes a finalizer: the sweeper does all of it.
type sweeper struct {
	meta metadata.Interface
	core kubernetes.Interface
	disc discovery.DiscoveryInterface

	once      sync.Once
	resources []schema.GroupVersionResource // namespaced, listable and deletable
	discErr   error

	mu    sync.Mutex
	dirty []string // namespaces a sweep did not finish

	// scopes are the resources of Scenario.Scopes, whose objects live
	// outside the executions' namespaces; keep, the objects of theirs that
	// were there before the first execution.
	scopes []scoped
	keep   map[types.UID]bool
}

func newSweeper(cfg *rest.Config) (*sweeper, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0             // the sweep's requests are many and local: no client-side rate limit
	cfg.WarningHandler = rest.NoWarnings{} // "v1 Endpoints is deprecated" on every sweep
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("unable to create the sweeper's metadata client: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("unable to create the sweeper's clientset: %w", err)
	}
	return &sweeper{meta: meta, core: core, disc: core.Discovery()}, nil
}

// namespaced lists, once, the namespaced resources the apiserver serves
// that can be listed and deleted (the CRDs installed by then included).
func (s *sweeper) namespaced() ([]schema.GroupVersionResource, error) {
	s.once.Do(func() {
		lists, err := s.disc.ServerPreferredNamespacedResources()
		if err != nil && len(lists) == 0 {
			s.discErr = fmt.Errorf("unable to discover the namespaced resources to sweep: %w", err)
			return
		}
		for _, l := range lists {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil {
				continue
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
					continue
				}
				s.resources = append(s.resources, gv.WithResource(r.Name))
			}
		}
	})
	return s.resources, s.discErr
}

// sweep removes namespace ns and everything in it, what earlier sweeps
// left unfinished, and every object of the scoped resources that was not
// there before the first execution, within ctx; what it does not finish is
// left for the next sweep.
func (s *sweeper) sweep(ctx context.Context, ns string) error {
	s.mu.Lock()
	todo := append(s.dirty, ns)
	s.dirty = nil
	s.mu.Unlock()
	errs := []error{s.sweepScoped(ctx)}
	for i, n := range todo {
		if err := s.sweepNamespace(ctx, n); err != nil {
			errs = append(errs, err)
			s.mu.Lock()
			s.dirty = append(s.dirty, todo[i:]...)
			s.mu.Unlock()
			break
		}
	}
	return errors.Join(errs...)
}

// sweepNamespace deletes every object in ns, its finalizers stripped, then
// ns itself, finalized.
func (s *sweeper) sweepNamespace(ctx context.Context, ns string) error {
	resources, err := s.namespaced()
	if err != nil {
		return err
	}
	work := make(chan schema.GroupVersionResource)
	errc := make(chan error, len(resources))
	var wg sync.WaitGroup
	for range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gvr := range work {
				if err := s.emptyResource(ctx, gvr, ns); err != nil {
					errc <- err
				}
			}
		}()
	}
	for _, gvr := range resources {
		work <- gvr
	}
	close(work)
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("unable to sweep namespace %s: %w", ns, errors.Join(errs...))
	}
	// The namespace, finalized at once: no namespace controller runs.
	err = s.core.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to delete namespace %s: %w", ns, err)
	}
	_, err = s.core.CoreV1().Namespaces().Finalize(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unable to finalize namespace %s: %w", ns, err)
	}
	return nil
}

// emptyResource deletes every object of gvr in ns at once, its finalizers
// stripped first.
func (s *sweeper) emptyResource(ctx context.Context, gvr schema.GroupVersionResource, ns string) error {
	return s.emptyResourceExcept(ctx, gvr, ns, func(types.UID) bool { return false })
}

// emptyResourceExcept deletes every object of gvr in ns ("": every
// namespace, or a cluster-scoped resource) but those keep says to keep, its
// finalizers stripped first.
func (s *sweeper) emptyResourceExcept(ctx context.Context, gvr schema.GroupVersionResource, ns string, keep func(types.UID) bool) error {
	client := s.meta.Resource(gvr).Namespace(ns)
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to list %s in %s: %w", gvr.GroupResource(), ns, err)
	}
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	for _, o := range list.Items {
		if keep(o.UID) {
			continue
		}
		if len(o.Finalizers) > 0 {
			_, err := client.Patch(ctx, o.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("unable to remove the finalizers of %s %s/%s: %w", gvr.GroupResource(), ns, o.Name, err)
			}
		}
		if err := client.Delete(ctx, o.Name, now); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unable to delete %s %s/%s: %w", gvr.GroupResource(), ns, o.Name, err)
		}
	}
	return nil
}
