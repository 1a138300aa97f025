// Copyright The prometheus-operator Authors
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package operator

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

type noopSyncer struct{}

func (noopSyncer) Sync(context.Context, string) error         { return nil }
func (noopSyncer) UpdateStatus(context.Context, string) error { return nil }

// ownerGetter serves the owners the reconciler looks up, keyed by
// "<namespace>/<name>".
type ownerGetter map[string]runtime.Object

func (g ownerGetter) Get(key string) (runtime.Object, error) {
	if o, ok := g[key]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "prometheuses"}, key)
}

// TestOnDeleteStatefulSetTombstone checks that the deletion of a
// StatefulSet enqueues its owner whether the informer delivers the
// StatefulSet itself or, when the deletion was observed through a relist
// (the watch ended and the re-watch met 410 Gone), a
// cache.DeletedFinalStateUnknown tombstone wrapping it. The owner must be
// reconciled to create the StatefulSet again; nothing else enqueues it (the
// resync of an unchanged Prometheus does not).
func TestOnDeleteStatefulSetTombstone(t *testing.T) {
	prom := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "Prometheus"},
		ObjectMeta: metav1.ObjectMeta{Name: "prom", Namespace: "default"},
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "prometheus-prom",
			Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "monitoring.coreos.com/v1",
				Kind:       "Prometheus",
				Name:       "prom",
				Controller: ptr.To(true),
			}},
		},
	}

	for _, tc := range []struct {
		name string
		obj  any
	}{
		{name: "StatefulSet", obj: sts},
		{name: "DeletedFinalStateUnknown", obj: cache.DeletedFinalStateUnknown{Key: "default/prometheus-prom", Obj: sts}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rr := NewResourceReconciler(
				slog.New(slog.DiscardHandler),
				noopSyncer{},
				ownerGetter{"default/prom": prom},
				NewMetrics(reg),
				"Prometheus",
				reg,
				"",
			)
			defer rr.Stop()

			rr.OnDelete(tc.obj)

			require.Equal(t, 1, rr.reconcileQ.Len(), fmt.Sprintf("the owner of the deleted StatefulSet should be enqueued once (got %T)", tc.obj))
			key, _ := rr.reconcileQ.Get()
			require.Equal(t, "default/prom", key)
		})
	}
}
