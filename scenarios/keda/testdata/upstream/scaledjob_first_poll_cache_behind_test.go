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

package keda

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/kedacore/keda/v2/pkg/eventemitter"
	"github.com/kedacore/keda/v2/pkg/scalers/authentication"
	"github.com/kedacore/keda/v2/pkg/scaling"
)

// heldScaledJobClient is a manager's client whose cache still shows one
// ScaledJob as it was created: Get returns held until release is called.
type heldScaledJobClient struct {
	client.Client
	mu   sync.Mutex
	held *kedav1alpha1.ScaledJob
}

func (c *heldScaledJobClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if sj, ok := obj.(*kedav1alpha1.ScaledJob); ok && held != nil && key == client.ObjectKeyFromObject(held) {
		held.DeepCopyInto(sj)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *heldScaledJobClient) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = nil
}

// A new ScaledJob whose trigger is active: the first reconcile adds the
// finalizer (ensureFinalizer) and starts the scale loop, whose first poll
// reads the ScaledJob through the manager's client, from the informer cache,
// and stamps the Jobs it creates with the generation it read. When the cache
// has not shown the reconcile's own writes by then, the reconcile that comes
// once it has must not delete the first poll's Jobs as owned by a previous
// version of the ScaledJob: nobody changed its spec.
func TestScaledJobFirstPollJobsNotDeletedAsPreviousVersion(t *testing.T) {
	g := NewWithT(t)
	testEnv := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	g.Expect(err).ToNot(HaveOccurred())
	defer func() { g.Expect(testEnv.Stop()).To(Succeed()) }()

	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(kedav1alpha1.AddToScheme(s)).To(Succeed())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).ToNot(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	k8sClient, err := client.New(cfg, client.Options{Scheme: s})
	g.Expect(err).ToNot(HaveOccurred())

	// The ScaledJob as a user applies it: its manifest has no spec.rollout.
	now := time.Now().UTC()
	manifest := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(`
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata: {name: sj-first-poll, namespace: default}
spec:
  pollingInterval: 1
  maxReplicaCount: 1
  jobTargetRef:
    template:
      spec:
        restartPolicy: Never
        containers: [{name: first-poll, image: first-poll}]
  triggers:
  - type: cron
    metadata: {timezone: UTC, start: "`+now.Add(-5*time.Minute).Format("04 15 * * *")+`", end: "`+now.Add(5*time.Minute).Format("04 15 * * *")+`", desiredReplicas: "1"}
`), &manifest.Object)).To(Succeed())
	g.Expect(k8sClient.Create(ctx, manifest)).To(Succeed())
	sj := &kedav1alpha1.ScaledJob{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(manifest), sj)).To(Succeed())
	key := client.ObjectKeyFromObject(sj)
	g.Eventually(func() error { return mgr.GetClient().Get(ctx, key, &kedav1alpha1.ScaledJob{}) }).
		WithTimeout(30 * time.Second).Should(Succeed())

	// The reconciler, called here as its controller would call it. Its scale
	// loop's cache shows the ScaledJob as created until the loop has made
	// its first Job.
	loopClient := &heldScaledJobClient{Client: mgr.GetClient(), held: sj.DeepCopy()}
	r := &ScaledJobReconciler{
		Client:        mgr.GetClient(),
		Scheme:        s,
		EventEmitter:  eventemitter.NewEventEmitter(mgr.GetClient(), mgr.GetEventRecorder("keda-operator"), "kubernetes-default", nil),
		AuthClientSet: &authentication.AuthClientSet{},
	}
	r.scaleHandler = scaling.NewScaleHandler(loopClient, nil, s, 0, 5*time.Second, mgr.GetEventRecorder("scale-handler"), r.AuthClientSet)
	defer func() { _ = r.scaleHandler.DeleteScalableObject(context.Background(), sj) }()
	req := ctrl.Request{NamespacedName: key}

	_, err = r.Reconcile(ctx, req)
	g.Expect(err).ToNot(HaveOccurred())

	jobs := &batchv1.JobList{}
	owned := []client.ListOption{client.InNamespace(key.Namespace), client.MatchingLabels{"scaledjob.keda.sh/name": key.Name}}
	g.Eventually(func() ([]batchv1.Job, error) {
		err := k8sClient.List(ctx, jobs, owned...)
		return jobs.Items, err
	}).WithTimeout(30 * time.Second).Should(HaveLen(1))
	first := jobs.Items[0]
	loopClient.release()

	// The reconcile that the ScaledJob's events trigger, once the cache
	// shows the ScaledJob as the apiserver has it and the first Job.
	live := &kedav1alpha1.ScaledJob{}
	g.Expect(k8sClient.Get(ctx, key, live)).To(Succeed())
	g.Eventually(func() (int64, error) {
		cached := &kedav1alpha1.ScaledJob{}
		err := mgr.GetClient().Get(ctx, key, cached)
		return cached.Generation, err
	}).WithTimeout(30 * time.Second).Should(Equal(live.Generation))
	g.Eventually(func() ([]batchv1.Job, error) {
		cached := &batchv1.JobList{}
		err := mgr.GetClient().List(ctx, cached, owned...)
		return cached.Items, err
	}).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).ToNot(HaveOccurred())

	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&first), &batchv1.Job{})).To(Succeed(),
		"the first poll's Job %s, stamped scaledjob.keda.sh/generation %q, was deleted as owned by a previous version of the ScaledJob, now at generation %d; its spec was never changed",
		first.Name, first.Annotations["scaledjob.keda.sh/generation"], live.Generation)
}
