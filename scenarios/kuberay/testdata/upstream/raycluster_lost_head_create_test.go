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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	clientFake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/expectations"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/scheme"
)

// TestReconcile_HeadPodCreateAnswerLost: the API server creates the head Pod
// but answers the create with a timeout (504, as its request timeout answers
// while etcd commits slowly), and the informer cache has not received the
// Pod when the reconcile the error requeued lists head Pods. The RayCluster
// must still end with one head Pod.
func TestReconcile_HeadPodCreateAnswerLost(t *testing.T) {
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

			// The first head Pod create is applied, and its answer is lost.
			// Until the test delivers its event, the cache (List and Get, as
			// the manager's cached client reads both) does not have that Pod.
			lost := map[string]bool{}
			headCreates := 0
			fakeClient := clientFake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if obj.GetLabels()[utils.RayNodeTypeLabelKey] != string(rayv1.HeadNode) {
						return c.Create(ctx, obj, opts...)
					}
					headCreates++
					if err := c.Create(ctx, obj, opts...); err != nil || headCreates > 1 {
						return err
					}
					lost[obj.GetName()] = true
					return k8serrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Pod); ok && lost[key.Name] {
						return k8serrors.NewNotFound(corev1.Resource("pods"), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if err := c.List(ctx, list, opts...); err != nil {
						return err
					}
					if pods, ok := list.(*corev1.PodList); ok {
						var seen []corev1.Pod
						for _, pod := range pods.Items {
							if !lost[pod.Name] {
								seen = append(seen, pod)
							}
						}
						pods.Items = seen
					}
					return nil
				},
			}).Build()

			testRayClusterReconciler := &RayClusterReconciler{
				Client:                     fakeClient,
				Recorder:                   record.NewFakeRecorder(100),
				Scheme:                     scheme.Scheme,
				rayClusterScaleExpectation: expectations.NewRayClusterScaleExpectation(fakeClient),
			}

			// The head Pod's create times out: the reconcile fails and is requeued.
			err := testRayClusterReconciler.reconcilePods(ctx, testRayCluster)
			require.Error(t, err)
			assert.True(t, k8serrors.IsTimeout(err), "want the create's timeout, got %v", err)

			// The requeued reconcile, before the head Pod's event reaches the cache.
			_ = testRayClusterReconciler.reconcilePods(ctx, testRayCluster)

			// The event arrives.
			clear(lost)
			headPods := corev1.PodList{}
			err = fakeClient.List(ctx, &headPods, common.RayClusterHeadPodsAssociationOptions(testRayCluster).ToListOptions()...)
			require.NoError(t, err)
			var names []string
			for _, pod := range headPods.Items {
				names = append(names, pod.Name)
			}
			assert.Len(t, names, 1, "head Pods after a lost answer to the head Pod's create")

			// With one head Pod the operator goes on reconciling the RayCluster.
			err = testRayClusterReconciler.reconcilePods(ctx, testRayCluster)
			assert.NotContains(t, errString(err), "Please delete extra head pods")
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
