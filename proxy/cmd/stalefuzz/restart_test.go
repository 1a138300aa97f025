package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stalefuzz/stalefuzz/proxy/reaper"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestProxyCommandAPIServerRestart stops kube-apiserver (etcd stays) while
// the built command proxies a client with an informer, then starts it again
// on the same address: while it is down the client's requests get 502 from
// the proxy; afterwards a GET succeeds and the informer watches again (it
// sees a later update); the trace has the 502s between the stop and the
// start, and a watch answered 200 after it.
func TestProxyCommandAPIServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	g := NewWithT(t)
	ctx := t.Context()
	cp, kubeconfig := startControlPlane(t)
	dir := t.TempDir()
	direct := kubernetes.NewForConfigOrDie(cp.Config)
	const ns, name = "stalefuzz-restart", "cm"
	_, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "create namespace %s", ns)
	_, err = direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "before"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "create configmap %s/%s", ns, name)

	bin := buildCommand(t)
	rules := filepath.Join(dir, "rules.yaml")
	mustWrite(t, rules, "rules: []\n")
	out, tracePath := filepath.Join(dir, "out"), filepath.Join(dir, "trace.jsonl")
	rc := startCommand(t, bin, dir, nil, "proxy", "--kubeconfig", kubeconfig, "--context", "envtest",
		"--client", "watcher", "--rules", rules, "--trace", tracePath, "--out", out, "-v", "1")
	addr := waitControl(t, out, rc.exited, &rc.stderr)

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(out, "watcher.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	watcher := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactoryWithOptions(watcher, 0, informers.WithNamespace(ns))
	lister := factory.Core().V1().ConfigMaps().Lister()
	informerCtx, stopInformer := context.WithCancel(context.WithoutCancel(ctx))
	t.Cleanup(func() { stopInformer(); factory.Shutdown() })
	factory.Start(informerCtx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		g.Expect(ok).To(BeTrue(), "informer of %v synced within 30s", typ)
	}
	cancel()
	get := func() error {
		_, err := watcher.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
	g.Expect(get()).To(Succeed(), "get configmap %s/%s through the proxy", ns, name)

	// kube-apiserver goes away; etcd stays. From when its process has
	// exited (down) until it is started again (up), nothing answers at its
	// address.
	before := cp.PIDs()
	stopping := time.Now()
	g.Expect(cp.StopAPIServer()).To(Succeed())
	down := time.Now()
	t.Logf("kube-apiserver stopped in %v", down.Sub(stopping).Round(time.Millisecond))
	after := cp.PIDs()
	g.Expect(after).To(HaveLen(len(before)-1), "PIDs %v → %v: kube-apiserver stopped, etcd running", before, after)
	for _, pid := range before {
		if !slices.Contains(after, pid) {
			g.Expect(reaper.Gone(pid)).To(BeTrue(), "the stopped kube-apiserver, PID %d, has exited", pid)
		}
	}
	// Every request through the proxy gets 502 Bad Gateway, not a hang.
	is502 := func(err error) bool {
		var st apierrors.APIStatus
		return errors.As(err, &st) && st.Status().Code == http.StatusBadGateway
	}
	err = get()
	g.Expect(is502(err)).To(BeTrue(), "get configmap %s/%s through the proxy with kube-apiserver down: want 502 Bad Gateway, got %v", ns, name, err)
	// The informer's watch ended; its re-watch (or relist) fails too.
	failedWatch := And(HaveField("Client", "watcher"), HaveField("Resource", "configmaps"),
		HaveField("Verb", BeElementOf("watch", "list")), HaveField("Code", http.StatusBadGateway))
	g.Eventually(func() []trace.Request { return getTrace(t, addr).Requests }).WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).
		Should(ContainElement(And(failedWatch, HaveField("Start", BeTemporally(">=", down)))), "GET /trace: the informer's failed re-watch while kube-apiserver is down")

	// kube-apiserver comes back on the same address.
	up := time.Now()
	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(get).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "get configmap %s/%s through the proxy after the restart", ns, name)
	cm, err := direct.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"v":"after"}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "patch configmap %s/%s directly after the restart", ns, name)
	// client-go's reflector backs off up to 30 s between failed attempts.
	g.Eventually(func() string {
		got, err := lister.ConfigMaps(ns).Get(name)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return got.Data["v"]
	}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(Equal("after"), "the informer sees an update made after the restart")

	g.Expect(rc.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	if err := rc.wait(30 * time.Second); err != nil {
		t.Fatalf("stalefuzz proxy after SIGINT: want exit 0, got %v; output:\n%s", err, rc.stderr.String())
	}
	stopInformer()
	factory.Shutdown()
	t.Logf("stalefuzz proxy's output:\n%s", rc.stderr.String())

	// The trace records the gap: the GET and the informer's attempts
	// answered 502 between the stop and the start, then a watch answered
	// 200 and the update released to the watcher. (A request during the
	// apiserver's graceful stop, before down, may have had another answer.)
	tr := readTraceFile(t, tracePath)
	during := func(r trace.Request) bool { return !r.Start.Before(down) && r.Start.Before(up) }
	var gap []string
	for _, r := range tr.Requests {
		if r.Client == "watcher" && during(r) {
			gap = append(gap, fmt.Sprintf("%s %s %d", r.Verb, r.Resource, r.Code))
			if r.Code != http.StatusBadGateway {
				t.Errorf("trace %s: %s %s/%s at %s, while kube-apiserver was down: want code 502, got %d", tracePath, r.Verb, r.Resource, r.Name, r.Start.Format(time.RFC3339Nano), r.Code)
			}
		}
	}
	t.Logf("the watcher's requests while kube-apiserver was down (%v): %v", up.Sub(down).Round(time.Millisecond), gap)
	g.Expect(tr.Requests).To(ContainElement(And(HaveField("Client", "watcher"), HaveField("Verb", "get"), HaveField("Name", name),
		HaveField("Code", http.StatusBadGateway), HaveField("Start", BeTemporally(">=", down)))), "trace %s: the GET answered 502", tracePath)
	g.Expect(tr.Requests).To(ContainElement(And(failedWatch, HaveField("Start", BeTemporally(">=", down)))), "trace %s: the informer's failed attempt", tracePath)
	g.Expect(tr.Requests).To(ContainElement(And(HaveField("Client", "watcher"), HaveField("Verb", "watch"), HaveField("Resource", "configmaps"),
		HaveField("Code", http.StatusOK), HaveField("Start", BeTemporally(">=", up)))), "trace %s: the informer's watch after the restart", tracePath)
	g.Expect(tr.Events).To(ContainElement(And(HaveField("Client", "watcher"), HaveField("Name", name),
		HaveField("ResourceVersion", cm.ResourceVersion), HaveField("Fate", trace.Released))), "trace %s: the update after the restart, released to the watcher", tracePath)
}
