/*
Copyright 2026 The KEDA Authors

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

package scaling

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/kedacore/keda/v2/pkg/mock/mock_client"
	"github.com/kedacore/keda/v2/pkg/scaling/executor"
)

// handleResult reads the object through the manager's client, which reads the
// informer cache. When the cache does not show the status the reconciler has
// just written (its four conditions), the result must not be patched over
// the apiserver's object as a diff against the cache's older copy: a JSON
// merge patch replaces the conditions list whole.
func TestHandleResult_CachedObjectBehindKeepsConditions(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	mockClient := mock_client.NewMockClient(ctrl)

	scheme := runtime.NewScheme()
	require.NoError(t, kedav1alpha1.AddToScheme(scheme))
	key := types.NamespacedName{Name: "test", Namespace: "ns"}
	created := &kedav1alpha1.ScaledJob{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	apiserver := fake.NewClientBuilder().WithScheme(scheme).WithObjects(created).WithStatusSubresource(created).Build()

	// The cache holds the ScaledJob as created; the apiserver's has the four
	// conditions the reconciler initialized.
	var cached kedav1alpha1.ScaledJob
	require.NoError(t, apiserver.Get(ctx, key, &cached))
	initialized := cached.DeepCopy()
	initialized.Status.Conditions = *kedav1alpha1.GetInitializedConditions()
	require.NoError(t, apiserver.Status().Update(ctx, initialized))

	mockClient.EXPECT().Get(gomock.Any(), key, gomock.Any()).
		DoAndReturn(func(_ context.Context, _ types.NamespacedName, obj *kedav1alpha1.ScaledJob, _ ...any) error {
			*obj = *cached.DeepCopy()
			return nil
		}).AnyTimes()
	mockClient.EXPECT().Status().Return(apiserver.Status()).AnyTimes()

	// The scale loop's first poll: a trigger is active.
	result := executor.ScaleResult{Conditions: kedav1alpha1.Conditions{}}
	result.Conditions.SetReadyCondition(metav1.ConditionTrue, "ScaledJobReady", "ScaledJob is defined correctly and is ready for scaling")
	result.Conditions.SetActiveCondition(metav1.ConditionTrue, "ScalerActive", "Scaling is performed because triggers are active")
	sh := scaleHandler{client: mockClient}
	sh.handleResult(ctx, &cached, result)

	var live kedav1alpha1.ScaledJob
	require.NoError(t, apiserver.Get(ctx, key, &live))
	assert.True(t, live.Status.Conditions.AreInitialized(),
		"the status patch, a diff against the cache's older copy, removed conditions the apiserver had: %+v", live.Status.Conditions)
}
