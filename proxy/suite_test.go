package proxy_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
)

func TestProxy(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "proxy")
}

var (
	cp     *controlplane.Environment
	px     *proxy.Proxy
	direct client.Client // straight to the apiserver, never stale
	scheme = runtime.NewScheme()
)

var _ = BeforeSuite(func() {
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	cp = &controlplane.Environment{CRDs: envtest.CRDInstallOptions{Paths: []string{"testdata/crds"}}}
	Expect(cp.Start()).To(Succeed())
	DeferCleanup(cp.Stop)

	var err error
	direct, err = client.New(cp.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	px = &proxy.Proxy{Upstream: cp.Config, Log: GinkgoLogr}
	Expect(px.Start()).To(Succeed())
	DeferCleanup(px.Stop)
})

var nsCount int

// newNamespace creates a fresh namespace for one spec. envtest never finishes
// deleting namespaces, so specs are isolated by never sharing one.
func newNamespace() string {
	nsCount++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proxy-%d-%d", GinkgoParallelProcess(), nsCount)}}
	Expect(direct.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
