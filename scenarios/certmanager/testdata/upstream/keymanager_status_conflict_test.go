/*
Copyright 2026 The cert-manager Authors.

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

package keymanager

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	coretesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	testpkg "github.com/cert-manager/cert-manager/pkg/controller/test"
)

// TestProcessItem_StatusConflictAfterSecretCreate: the key manager creates
// the next private key Secret, then its status write recording the
// Secret's name meets a 409 Conflict (another certificates controller
// updated the Certificate first). The requeued reconcile runs before the
// Secret informer has received the Secret's ADDED event, so its lister
// shows no next private key, and the Certificate read from the apiserver
// names none. It must not generate a second private key: the first is
// recorded nowhere but in the apiserver.
func TestProcessItem_StatusConflictAfterSecretCreate(t *testing.T) {
	crt := &cmapi.Certificate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "testns", Name: "test", UID: types.UID("test")},
		Spec:       cmapi.CertificateSpec{SecretName: "test-tls"},
		Status: cmapi.CertificateStatus{
			Conditions: []cmapi.CertificateCondition{
				{Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue},
			},
		},
	}
	n := 0
	builder := &testpkg.Builder{
		T:                  t,
		CertManagerObjects: []runtime.Object{crt},
		// A name per generateName create, as the apiserver gives.
		StringGenerator: func(int) string { n++; return fmt.Sprintf("key%02d", n) },
	}
	builder.Init()

	conflicts := 1
	builder.FakeCMClient().PrependReactor("update", "certificates", func(action coretesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" || conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(cmapi.Resource("certificates"), "test", fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	})

	w := &controllerWrapper{}
	if _, _, err := w.Register(builder.Context); err != nil {
		t.Fatal(err)
	}
	builder.Start()
	defer builder.Stop()

	// The Secret informer's cache, which has not received the ADDED event of
	// the Secret the first reconcile creates.
	w.controller.secretLister = corelisters.NewSecretLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))

	key := types.NamespacedName{Namespace: "testns", Name: "test"}
	if err := w.controller.ProcessItem(t.Context(), key); !apierrors.IsConflict(err) {
		t.Fatalf("first reconcile: got error %v, want the Conflict of its status write", err)
	}
	// The reconcile the Conflict requeues.
	if err := w.controller.ProcessItem(t.Context(), key); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}

	secrets, err := builder.FakeKubeClient().CoreV1().Secrets("testns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secrets.Items {
		if s.Labels[cmapi.IsNextPrivateKeySecretLabelKey] == "true" && metav1.IsControlledBy(&s, crt) {
			names = append(names, s.Name)
		}
	}
	if len(names) != 1 {
		t.Errorf("next private key Secrets of the Certificate: %v, want exactly one (a private key generated once per issuance)", names)
	}
	latest, err := builder.FakeCMClient().CertmanagerV1().Certificates("testns").Get(t.Context(), "test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := latest.Status.NextPrivateKeySecretName; got == nil || len(names) == 0 || *got != names[0] {
		t.Errorf("status.nextPrivateKeySecretName = %q, want the first Secret's name, of %v", ptr.Deref(got, ""), names)
	}
}
