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

package trigger

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	coretesting "k8s.io/client-go/testing"
	fakeclock "k8s.io/utils/clock/testing"

	"github.com/cert-manager/cert-manager/internal/controller/certificates/policies"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	testpkg "github.com/cert-manager/cert-manager/pkg/controller/test"
	"github.com/cert-manager/cert-manager/test/unit/gen"
)

// Test_controller_ProcessItem_SecretCacheBehind: the issuing controller has
// written the Certificate's Secret, then its status (revision 1). The
// Certificate's event reaches the trigger controller before the Secret's:
// the Secrets informer's cache does not have the Secret yet, though the
// apiserver does. The trigger must not start a second issuance (a new
// private key, a new CertificateRequest) because its cache is behind: the
// Secret exists.
func Test_controller_ProcessItem_SecretCacheBehind(t *testing.T) {
	fixedNow := metav1.NewTime(time.Now())
	fixedClock := fakeclock.NewFakeClock(fixedNow.Time)

	crt := gen.Certificate("cert-1", gen.SetCertificateNamespace("testns"),
		gen.SetCertificateSecretName("secret-1"),
		gen.SetCertificateGeneration(1),
		gen.SetCertificateRevision(1),
	)
	secret := gen.Secret("secret-1", gen.SetSecretNamespace("testns"))

	builder := &testpkg.Builder{
		T:                  t,
		Clock:              fixedClock,
		CertManagerObjects: []runtime.Object{crt},
		KubeObjects:        []runtime.Object{secret},
		// A read of the Secret from the apiserver is allowed; an update of
		// the Certificate's status (Issuing=True) is not.
		ExpectedActions: []testpkg.Action{
			testpkg.NewAction(coretesting.NewGetAction(corev1.SchemeGroupVersion.WithResource("secrets"), "testns", "secret-1")),
		},
	}
	builder.Init()

	w := &controllerWrapper{}
	if _, _, err := w.Register(builder.Context); err != nil {
		t.Fatal(err)
	}
	w.certificateRequestMinimumBackoffDuration = 1 * time.Hour
	w.certificateRequestMaximumBackoffDuration = 32 * time.Hour

	// The trigger policy chain's first check, on what the caches hold: the
	// Secrets cache has not received the Secret yet.
	w.shouldReissue = policies.SecretDoesNotExist
	w.dataForCertificate = func(context.Context, *cmapi.Certificate) (policies.Input, error) {
		return policies.Input{Certificate: crt, Secret: nil}, nil
	}

	builder.Start()
	defer builder.Stop()

	if err := w.controller.ProcessItem(t.Context(), types.NamespacedName{Namespace: "testns", Name: "cert-1"}); err != nil {
		t.Fatal(err)
	}
	for _, a := range builder.FakeCMClient().Actions() {
		if a.GetResource().Resource == "certificates" && a.GetSubresource() == "status" {
			t.Errorf("the trigger set Issuing on a Secrets cache that had not caught up with the apiserver: %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	builder.CheckAndFinish()
}
