/*
Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package ray

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	clientFake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/expectations"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/scheme"
)

// TestReconcile_HeadPodAfterRestartOntoStaleList: the operator creates the
// head Pod and is restarted right after (an OOM kill, an eviction, a
// rollout). The new process has no expectations, and its informer's first
// list comes from an API server whose watch cache has not seen the head Pod
// yet (a LIST at resourceVersion 0, as client-go lists without WatchList).
// The RayCluster must still end with one head Pod.
func TestReconcile_HeadPodAfterRestartOntoStaleList(t *testing.T) {
	tests := []struct {
		name                 string
		deterministicHeadPod string
	}{
		{name: "generated head Pod name (the default)", deterministicHeadPod: ""},
		{name: "deterministic head Pod name", deterministicHeadPod: "true"},
	}

	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			setupTest(t)
			t.Setenv(utils.ENABLE_DETERMINISTIC_HEAD_POD_NAME, test.deterministicHeadPod)
			ctx := context.Background()

			// Pods the restarted process's cache has not listed yet.
			stale := map[string]bool{}
			cached, live := staleListClient(stale)
			headPods := func() []string {
				return podNames(t, live, common.RayClusterHeadPodsAssociationOptions(testRayCluster))
			}

			// The first process creates the head Pod.
			_ = newProcess(cached, live).reconcilePods(ctx, testRayCluster)
			first := headPods()
			require.Len(t, first, 1, "head Pods made by the first process")

			// It is restarted; the new process lists from a lagging API server.
			stale[first[0]] = true
			restarted := newProcess(cached, live)
			_ = restarted.reconcilePods(ctx, testRayCluster)

			// The head Pod's event reaches the new process's cache.
			clear(stale)
			assert.Len(t, headPods(), 1, "head Pods after a restart onto a lagging API server")
			if err := restarted.reconcilePods(ctx, testRayCluster); err != nil {
				assert.NotContains(t, err.Error(), "Please delete extra head pods")
			}
		})
	}
}

// TestReconcile_WorkerPodsAfterRestartOntoStaleList: the operator creates the
// head Pod and the worker Pods and is restarted right after (an OOM kill, an
// eviction, a rollout). The new process has no expectations, and its
// informer's first list comes from an API server whose watch cache has not
// seen the last worker Pod's create yet (a LIST at resourceVersion 0, as
// client-go lists without WatchList). The worker group must not end with
// more Pods than its replicas: the extra one would later be deleted, at
// random among running workers.
func TestReconcile_WorkerPodsAfterRestartOntoStaleList(t *testing.T) {
	setupTest(t)
	ctx := context.Background()

	// Pods the restarted process's cache has not listed yet.
	stale := map[string]bool{}
	cached, live := staleListClient(stale)
	group := testRayCluster.Spec.WorkerGroupSpecs[0]
	replicas := int(*group.Replicas * group.NumOfHosts)
	workerPods := func() []string {
		return podNames(t, live, common.RayClusterGroupPodsAssociationOptions(testRayCluster, group.GroupName))
	}

	// The first process creates the head Pod and the workers.
	_ = newProcess(cached, live).reconcilePods(ctx, testRayCluster)
	first := workerPods()
	require.Len(t, first, replicas, "worker Pods made by the first process")

	// It is restarted; the new process lists from a lagging API server that
	// has not seen the last worker's create.
	stale[first[len(first)-1]] = true
	_ = newProcess(cached, live).reconcilePods(ctx, testRayCluster)

	// That create reaches the new process's cache.
	clear(stale)
	assert.Len(t, workerPods(), replicas, "worker Pods of group %s after a restart onto a lagging API server", group.GroupName)
}

// staleListClient is a fake client, live, and the same client as a
// restarted process's cache sees it, cached: its List leaves out the Pods
// named in stale, as a first list from an API server that had not seen them
// yet does.
func staleListClient(stale map[string]bool) (cached, live client.WithWatch) {
	live = clientFake.NewClientBuilder().Build()
	return interceptor.NewClient(live, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if pods, ok := list.(*corev1.PodList); ok {
				var seen []corev1.Pod
				for _, pod := range pods.Items {
					if !stale[pod.Name] {
						seen = append(seen, pod)
					}
				}
				pods.Items = seen
			}
			return nil
		},
	}), live
}

// newProcess is a RayClusterReconciler as a new operator process makes it:
// its scale expectations empty, its reads from the cache, c. A reconciler
// with an APIReader field (an uncached reader, the manager's
// GetAPIReader(), which the fix adds) is given live as it; v1.6.2's has
// none, and the field is set by name so that the test builds there too.
func newProcess(c client.Client, live client.Reader) *RayClusterReconciler {
	r := &RayClusterReconciler{
		Client:                     c,
		Recorder:                   record.NewFakeRecorder(100),
		Scheme:                     scheme.Scheme,
		rayClusterScaleExpectation: expectations.NewRayClusterScaleExpectation(c),
	}
	if f := reflect.ValueOf(r).Elem().FieldByName("APIReader"); f.IsValid() {
		f.Set(reflect.ValueOf(live))
	}
	return r
}

// podNames lists the names of the Pods matching opts, as the API server has them.
func podNames(t *testing.T, c client.Client, opts common.AssociationOptions) []string {
	pods := corev1.PodList{}
	require.NoError(t, c.List(context.Background(), &pods, opts.ToListOptions()...))
	var names []string
	for _, pod := range pods.Items {
		names = append(names, pod.Name)
	}
	return names
}
