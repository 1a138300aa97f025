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

package executor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/mock/gomock"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	runtimeclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kedacore/keda/v2/pkg/mock/mock_client"
)

// The scale loop counts a ScaledJob's Jobs through the manager's client,
// which reads the informer cache, and creates Jobs with generateName. A poll
// that comes before the cache shows the Jobs the previous poll created must
// not create them again.
func TestRequestJobScale_CreatedJobsNotYetInCache(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	client := mock_client.NewMockClient(ctrl)
	scaleExecutor := getMockScaleExecutor(client)
	scaleExecutor.recorder = events.NewFakeRecorder(20)
	scaledJob := getMockScaledJobWithDefaultStrategyAndMeta()
	scaledJob.UID = "7b0e6f9e-0d8e-4a5c-9d61-2f5d3c1f0a11"
	maxReplicaCount := int32(3)
	scaledJob.Spec.MaxReplicaCount = &maxReplicaCount

	// created: the Jobs the apiserver has; cached: the Jobs the cache shows.
	var created, cached []batchv1.Job
	client.EXPECT().Create(gomock.Any(), gomock.Any(), gomock.Any()).
		DoAndReturn(func(_ context.Context, obj runtime.Object, _ ...runtimeclient.CreateOption) error {
			job := obj.(*batchv1.Job)
			job.Name = fmt.Sprintf("%s%d", job.GenerateName, len(created))
			created = append(created, *job.DeepCopy())
			return nil
		}).AnyTimes()
	client.EXPECT().List(gomock.Any(), gomock.Any(), gomock.Any()).
		DoAndReturn(func(_ context.Context, list runtime.Object, _ ...runtimeclient.ListOption) error {
			if jobs, ok := list.(*batchv1.JobList); ok {
				jobs.Items = append([]batchv1.Job(nil), cached...)
			}
			return nil
		}).AnyTimes()

	// A queue of 2 messages: each poll asks for 2 Jobs.
	poll := func() {
		result := scaleExecutor.RequestJobScale(ctx, scaledJob, true, false, 2, 2, ScaleExecutorOptions{})
		assert.NoError(t, result.Error)
	}

	poll()
	assert.Equal(t, 2, len(created), "the first poll creates a Job per message")

	// The Job informer has not delivered the first poll's Jobs when the next
	// poll comes (Job events later than pollingInterval, or a loop restarted
	// by a reconcile, which polls at once).
	poll()
	assert.Equal(t, 2, len(created), "a poll before the cache shows the Jobs made by the poll before it creates them again (maxReplicaCount 3)")

	// The cache catches up: the two running Jobs are counted once.
	cached = append([]batchv1.Job(nil), created...)
	poll()
	assert.Equal(t, 2, len(created), "Jobs the cache shows are counted once")

	// Both finish: the next poll creates two again for the two messages.
	for i := range cached {
		cached[i].Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
	}
	poll()
	assert.Equal(t, 4, len(created), "finished Jobs are not running")
}
