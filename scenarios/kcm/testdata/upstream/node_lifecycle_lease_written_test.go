/*
Copyright 2026 The Kubernetes Authors.

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

package nodelifecycle

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/controller/testutil"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// TestMonitorNodeHealthLeaseWrittenWithoutRenewal: a node's kubelet dies, and
// its Lease is then written without being renewed (a label here; an
// annotation, a policy engine's mutation or a kubelet whose clock stepped
// back do the same). The informer cache is current: it holds that write, as
// the API server does. The Lease has not been renewed for longer than the
// grace period, so the node must be marked Unknown and its pods not ready.
//
// With NodeControllerLeaseCircuitBreaker on, the live Lease is compared with
// nodeHealth.lease, the last Lease whose renewTime moved forward, not with the
// informer's copy: the two resourceVersions differ forever, every monitor
// period is skipped as a stale cache, and the node is never marked Unknown.
func TestMonitorNodeHealthLeaseWrittenWithoutRenewal(t *testing.T) {
	nodeCreationTime := metav1.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC)
	fakeNow := metav1.Date(2015, 1, 1, 12, 0, 0, 0, time.UTC)

	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.NodeControllerLeaseCircuitBreaker, true)

	nodeStatus := v1.NodeStatus{
		Conditions: []v1.NodeCondition{
			{
				Type:               v1.NodeReady,
				Status:             v1.ConditionTrue,
				LastHeartbeatTime:  fakeNow,
				LastTransitionTime: fakeNow,
			},
		},
		Capacity: v1.ResourceList{
			v1.ResourceName(v1.ResourceCPU):    resource.MustParse("10"),
			v1.ResourceName(v1.ResourceMemory): resource.MustParse("10G"),
		},
	}
	fakeNodeHandler := &testutil.FakeNodeHandler{
		Existing: []*v1.Node{
			{
				ObjectMeta: metav1.ObjectMeta{
					Name:              "node0",
					CreationTimestamp: nodeCreationTime,
				},
				Status: nodeStatus,
			},
		},
		Clientset: fake.NewSimpleClientset(&v1.PodList{Items: []v1.Pod{*testutil.NewPod("pod0", "node0")}}),
	}
	// The kubelet's last renewal.
	renewed := createNodeLease("node0", metav1.NewMicroTime(fakeNow.Time))
	renewed.ResourceVersion = "50"
	// The kubelet is dead; someone labels its Lease. renewTime does not move.
	labelled := renewed.DeepCopy()
	labelled.ResourceVersion = "60"
	labelled.Labels = map[string]string{"example.com/audited": "true"}

	tCtx := ktesting.Init(t)
	nodeController, _ := newNodeLifecycleControllerFromClient(
		tCtx,
		fakeNodeHandler,
		testRateLimiterQPS,
		testRateLimiterQPS,
		testLargeClusterThreshold,
		testUnhealthyThreshold,
		testNodeMonitorGracePeriod,
		testNodeStartupGracePeriod,
		testNodeMonitorPeriod,
	)
	nodeController.now = func() metav1.Time { return fakeNow }
	nodeController.recorder = testutil.NewFakeRecorder()
	nodeController.getPodsAssignedToNode = fakeGetPodsAssignedToNode(fakeNodeHandler.Clientset)
	if err := nodeController.syncNodeStore(fakeNodeHandler); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if err := nodeController.syncLeaseStore(renewed); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if _, err := fakeNodeHandler.CoordinationV1().Leases(v1.NamespaceNodeLease).Create(tCtx, renewed, metav1.CreateOptions{}); err != nil {
		t.Fatalf("unexpected error creating lease in fake client: %v", err)
	}
	if err := nodeController.monitorNodeHealth(tCtx); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}

	// The label is written, and seen by the informer, before the grace period ends.
	if err := nodeController.syncLeaseStore(labelled); err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if _, err := fakeNodeHandler.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(tCtx, labelled, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("unexpected error updating lease in fake client: %v", err)
	}

	// Monitor periods after the grace period: the node must be marked Unknown
	// in the first of them, and certainly by the last.
	for _, elapsed := range []time.Duration{
		testNodeMonitorGracePeriod + testNodeMonitorPeriod,
		testNodeMonitorGracePeriod + 2*testNodeMonitorPeriod,
		testNodeMonitorGracePeriod + 3*testNodeMonitorPeriod,
	} {
		nodeController.now = func() metav1.Time { return metav1.Time{Time: fakeNow.Add(elapsed)} }
		if err := nodeController.syncNodeStore(fakeNodeHandler); err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if err := nodeController.monitorNodeHealth(tCtx); err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	}

	var ready *v1.NodeCondition
	for _, n := range fakeNodeHandler.UpdatedNodeStatuses {
		for i := range n.Status.Conditions {
			if c := n.Status.Conditions[i]; n.Name == "node0" && c.Type == v1.NodeReady {
				ready = &c
			}
		}
	}
	if ready == nil || ready.Status != v1.ConditionUnknown {
		t.Errorf("node0's Lease was last renewed %v ago (then labelled, not renewed): want Ready=Unknown, got %+v", testNodeMonitorGracePeriod+3*testNodeMonitorPeriod, ready)
	}
	podStatusUpdated := false
	for _, action := range fakeNodeHandler.Actions() {
		if action.GetVerb() == "update" && action.GetResource().Resource == "pods" && action.GetSubresource() == "status" {
			podStatusUpdated = true
		}
	}
	if !podStatusUpdated {
		t.Errorf("expected pod0 on node0 to be marked not ready")
	}
}
