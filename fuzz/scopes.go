package fuzz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// scoped is a resource of Scenario.Scopes, resolved: its objects live in
// Namespace ("" for a cluster-scoped resource), shared by every execution.
type scoped struct {
	gvr       schema.GroupVersionResource
	namespace string
}

func (s scoped) String() string {
	if s.namespace == "" {
		return s.gvr.GroupResource().String() + " (cluster-scoped)"
	}
	return s.gvr.GroupResource().String() + " in namespace " + s.namespace
}

// resolveScopes checks that each resource of the scenario lives where the
// scenario says (a cluster-scoped resource must be declared Cluster in
// Scopes, a namespaced one must not be), and returns the resources of Scopes,
// resolved. A resource the apiserver does not serve is left to the warm-up,
// which names it with a did-you-mean.
func (e *Env) resolveScopes() ([]scoped, error) {
	mapper := e.direct.RESTMapper()
	var out []scoped
	var errs []error
	for _, r := range e.s.Resources {
		gvrs, err := mapper.ResourcesFor(schema.GroupVersionResource{Resource: r})
		if err != nil || len(gvrs) == 0 || gvrs[0].Resource != r {
			continue
		}
		gvk, err := mapper.KindFor(gvrs[0])
		if err != nil {
			continue
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue
		}
		cluster := mapping.Scope.Name() == meta.RESTScopeNameRoot
		where, declared := e.s.Scopes[r]
		switch {
		case cluster && (!declared || where != Cluster):
			errs = append(errs, fmt.Errorf("resource %q (%s) is cluster-scoped, so a lag step confined to a namespace would never act on it: declare it in Scenario.Scopes as fuzz.Cluster", r, gvrs[0].GroupResource()))
		case !cluster && declared && where == Cluster:
			errs = append(errs, fmt.Errorf("resource %q (%s) is namespaced, but Scenario.Scopes declares it cluster-scoped: give the namespace its objects live in, or remove it from Scopes for the execution's own", r, gvrs[0].GroupResource()))
		case declared:
			out = append(out, scoped{gvr: gvrs[0], namespace: where})
		}
	}
	return out, errors.Join(errs...)
}

// swept resolves Scenario.Sweep: the cluster-scoped ones of its kinds that
// the apiserver serves, less those of scopes.
func (e *Env) swept(scopes []scoped) []scoped {
	var out []scoped
	for _, gvk := range e.s.Sweep {
		m, err := e.direct.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil || m.Scope.Name() != meta.RESTScopeNameRoot {
			continue // not served (yet), or namespaced: swept with the namespace
		}
		sc := scoped{gvr: m.Resource}
		if !slices.Contains(scopes, sc) && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// cachedNamespaces are the namespaces a manager's cache covers in an
// execution in ns: ns and the namespaces of Scenario.Scopes.
func (e *Env) cachedNamespaces(ns string) map[string]cache.Config {
	out := map[string]cache.Config{ns: {}}
	for _, where := range e.s.Scopes {
		if where != Cluster {
			out[where] = cache.Config{}
		}
	}
	return out
}

// keepScoped records the objects of the scoped resources that exist before
// any execution, which the sweep leaves alone.
func (s *sweeper) keepScoped(ctx context.Context, scopes []scoped) error {
	s.scopes = scopes
	s.keep = map[types.UID]bool{}
	for _, sc := range scopes {
		list, err := s.meta.Resource(sc.gvr).Namespace(sc.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("unable to list %s before the first execution: %w", sc, err)
		}
		for _, o := range list.Items {
			s.keep[o.UID] = true
		}
	}
	return nil
}

// sweepScoped deletes every object of the scoped resources that did not
// exist before the first execution, finalizers stripped first.
func (s *sweeper) sweepScoped(ctx context.Context) error {
	var errs []error
	for _, sc := range s.scopes {
		err := s.emptyResourceExcept(ctx, sc.gvr, sc.namespace, func(uid types.UID) bool { return s.keep[uid] })
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ScopedObjects is what, of the resources of Scenario.Scopes and the kinds
// of Scenario.Sweep, is in the apiserver now and was not when NewEnv began:
// what the sweep after each execution removes. For tests and figures.
func (e *Env) ScopedObjects(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	for _, sc := range e.sweep.scopes {
		list, err := e.sweep.meta.Resource(sc.gvr).Namespace(sc.namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("unable to list %s: %w", sc, err)
		}
		for _, o := range list.Items {
			if !e.sweep.keep[o.UID] {
				out[sc.gvr.Resource] = append(out[sc.gvr.Resource], o.Name)
			}
		}
	}
	for _, k := range slices.Collect(maps.Keys(out)) {
		slices.Sort(out[k])
	}
	return out, nil
}
