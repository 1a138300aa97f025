package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"net/http"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

const protobuf = "application/vnd.kubernetes.protobuf"

var widgetGVR = schema.GroupVersionResource{Group: "test.stalefuzz.dev", Version: "v1", Resource: "widgets"}

// kindUnderTest is one of the two framings the proxy must handle.
type kindUnderTest struct {
	resource    string
	contentType string // what the client asks for; the watch must come back in it
	newObject   func(ns, name, value string) client.Object
	value       func(client.Object) string
	setValue    func(client.Object, string)
}

var configMaps = kindUnderTest{
	resource:    "configmaps",
	contentType: protobuf,
	newObject: func(ns, name, v string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"value": v}}
	},
	value:    func(o client.Object) string { return o.(*corev1.ConfigMap).Data["value"] },
	setValue: func(o client.Object, v string) { o.(*corev1.ConfigMap).Data["value"] = v },
}

var widgets = kindUnderTest{
	resource:    "widgets",
	contentType: "application/json",
	newObject: func(ns, name, v string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("test.stalefuzz.dev/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		_ = unstructured.SetNestedField(u.Object, v, "spec", "value")
		return u
	},
	value: func(o client.Object) string {
		v, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "spec", "value")
		return v
	},
	setValue: func(o client.Object, v string) {
		_ = unstructured.SetNestedField(o.(*unstructured.Unstructured).Object, v, "spec", "value")
	},
}

// cachedClient returns a controller-runtime client reading from an informer
// cache scoped to ns, all of it through proxy client name.
func cachedClient(name, ns, contentType string) client.Client {
	c, err := px.Client(name)
	Expect(err).NotTo(HaveOccurred())
	cfg := c.Config()
	if contentType == protobuf {
		cfg.ContentType = protobuf
		cfg.AcceptContentTypes = protobuf + ",application/json"
	}
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		Expect(informers.Start(ctx)).To(Succeed())
	}()
	cl, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: informers, Unstructured: true}})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// clearRules removes every rule after a spec.
func clearRules() { Expect(px.SetRules(time.Now())).To(Succeed()) }

var _ = Describe("a cached client whose watch is held at the proxy", func() {
	DescribeTable("writes from its stale cache meet the real apiserver",
		func(k kindUnderTest) {
			ctx := context.Background()
			ns := newNamespace()
			clientName := "stale-" + k.resource
			cl := cachedClient(clientName, ns, k.contentType)
			start := px.Trace().Cursor()

			Expect(direct.Create(ctx, k.newObject(ns, "obj", "original"))).To(Succeed())
			seen := k.newObject(ns, "obj", "")
			Eventually(func() (string, error) {
				err := cl.Get(ctx, client.ObjectKeyFromObject(seen), seen)
				return k.value(seen), err
			}).WithTimeout(10 * time.Second).Should(Equal("original"))

			By("holding " + k.resource + " events for the cached client, then writing behind its back")
			Expect(px.SetRules(time.Now(), proxy.Rule{Client: clientName, Resource: k.resource, Namespace: ns, Action: proxy.Hold, To: time.Minute})).To(Succeed())
			DeferCleanup(clearRules)
			fresh := k.newObject(ns, "obj", "")
			Expect(direct.Get(ctx, client.ObjectKeyFromObject(fresh), fresh)).To(Succeed())
			k.setValue(fresh, "fresh")
			Expect(direct.Update(ctx, fresh)).To(Succeed())

			stale := k.newObject(ns, "obj", "")
			Consistently(func() (string, error) {
				err := cl.Get(ctx, client.ObjectKeyFromObject(stale), stale)
				return k.value(stale), err
			}).WithTimeout(500*time.Millisecond).Should(Equal("original"), "the cache must stay stale while its watch is held")
			staleRV := stale.GetResourceVersion()
			Expect(staleRV).NotTo(Equal(fresh.GetResourceVersion()))

			By("Update from the stale cache")
			upd := stale.DeepCopyObject().(client.Object)
			k.setValue(upd, "stale update")
			err := cl.Update(ctx, upd)
			Expect(apierrors.IsConflict(err)).To(BeTrue(), "want 409 Conflict, got %v", err)
			Expect(err.Error()).To(ContainSubstring("the object has been modified"), "the apiserver's own message")

			By("MergeFromWithOptimisticLock patch from the stale cache")
			occ := stale.DeepCopyObject().(client.Object)
			k.setValue(occ, "stale occ patch")
			err = cl.Patch(ctx, occ, client.MergeFromWithOptions(stale, client.MergeFromWithOptimisticLock{}))
			Expect(apierrors.IsConflict(err)).To(BeTrue(), "want 409 Conflict, got %v", err)

			By("plain MergeFrom patch from the stale cache: accepted, and the fresh write is lost")
			blind := stale.DeepCopyObject().(client.Object)
			k.setValue(blind, "stale blind patch")
			Expect(cl.Patch(ctx, blind, client.MergeFrom(stale))).To(Succeed())
			after := k.newObject(ns, "obj", "")
			Expect(direct.Get(ctx, client.ObjectKeyFromObject(after), after)).To(Succeed())
			Expect(k.value(after)).To(Equal("stale blind patch"), "the blind patch overwrote %q, which its writer never saw", "fresh")

			By("the trace shows each write, its precondition and the apiserver's answer")
			tr := px.Trace().Since(start)
			var writes []string
			for _, r := range tr.Requests {
				if r.Client == clientName && (r.Verb == "update" || r.Verb == "patch") {
					writes = append(writes, fmt.Sprintf("%s %d sent=%s", r.Verb, r.Code, r.SentRV))
				}
			}
			Expect(writes).To(Equal([]string{
				"update 409 sent=" + staleRV,
				"patch 409 sent=" + staleRV,
				"patch 200 sent=",
			}))
			watchCT := ""
			for _, r := range tr.Requests {
				if r.Client == clientName && r.Verb == "watch" && r.Resource == k.resource {
					watchCT = r.ContentType
				}
			}
			Expect(watchCT).To(HavePrefix(k.contentType), "the watch stream's framing")
			held := slices.ContainsFunc(tr.Events, func(e trace.Event) bool {
				return e.Client == clientName && e.Name == "obj" && e.ResourceVersion == fresh.GetResourceVersion() && e.Fate == trace.Pending
			})
			Expect(held).To(BeTrue(), "the fresh write's event is still held at the proxy")
		},
		Entry("ConfigMap (protobuf watch)", configMaps),
		Entry("Widget CRD (JSON watch)", widgets),
	)
})

// received is one event as a watching client saw it.
type received struct {
	typ, name, rv string
	initialEnd    bool
	at            time.Time
}

func (r received) String() string { return fmt.Sprintf("%s %s@%s", r.typ, r.name, r.rv) }

// collect reads w until stop says so or the budget runs out.
func collect(w watch.Interface, budget time.Duration, stop func([]received) bool) []received {
	var got []received
	timeout := time.After(budget)
	for !stop(got) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				Fail(fmt.Sprintf("watch closed after %d events", len(got)))
			}
			m, err := meta.Accessor(ev.Object)
			Expect(err).NotTo(HaveOccurred())
			got = append(got, received{
				typ: string(ev.Type), name: m.GetName(), rv: m.GetResourceVersion(),
				initialEnd: m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true", at: time.Now(),
			})
		case <-timeout:
			Fail(fmt.Sprintf("after %v the watch had delivered only %d events: %v", budget, len(got), got))
		}
	}
	return got
}

var _ = Describe("ordering", func() {
	It("delivers every event in its original order under random per-event delays, bookmarks never ahead of held events", func() {
		ctx := context.Background()
		ns := newNamespace()
		const n = 30
		for i := range n {
			Expect(direct.Create(ctx, configMaps.newObject(ns, fmt.Sprintf("cm-%02d", i), "0"))).To(Succeed())
		}
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		var rules []proxy.Rule
		for i := range n {
			rules = append(rules, proxy.Rule{Client: "order", Name: fmt.Sprintf("cm-%02d", i), Action: proxy.Delay, Delay: time.Duration(rng.IntN(400)) * time.Millisecond})
		}
		Expect(px.SetRules(time.Now(), rules...)).To(Succeed())
		DeferCleanup(clearRules)

		c, err := px.Client("order")
		Expect(err).NotTo(HaveOccurred())
		cfg := c.Config()
		cfg.ContentType, cfg.AcceptContentTypes = protobuf, protobuf
		cs := kubernetes.NewForConfigOrDie(cfg)
		start := px.Trace().Cursor()
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
			SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		for round := range 2 {
			for i := range n {
				cm := &corev1.ConfigMap{}
				Expect(direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i)}, cm)).To(Succeed())
				cm.Data["value"] = fmt.Sprint(round + 1)
				Expect(direct.Update(ctx, cm)).To(Succeed())
			}
		}
		got := collect(w, 30*time.Second, func(got []received) bool {
			return len(slices.DeleteFunc(slices.Clone(got), func(r received) bool { return r.typ == "BOOKMARK" })) == 3*n
		})

		By(fmt.Sprintf("seed %d: comparing with what the apiserver sent, in arrival order", seed))
		var sent []string
		delayed := 0
		for _, e := range px.Trace().Since(start).Events {
			if e.Client != "order" {
				continue
			}
			if e.Type == "BOOKMARK" && !e.InitialEnd {
				continue // periodic bookmarks may arrive after collect stopped
			}
			sent = append(sent, fmt.Sprintf("%s %s@%s", e.Type, e.Name, e.ResourceVersion))
			if e.Fate == trace.Released && e.Released.Sub(e.Arrived) > 100*time.Millisecond {
				delayed++
			}
		}
		var saw []string
		for _, r := range got {
			if r.typ == "BOOKMARK" && !r.initialEnd {
				continue
			}
			if r.typ == "BOOKMARK" {
				r.name = "" // a bookmark carries no name
			}
			saw = append(saw, r.String())
		}
		Expect(saw).To(Equal(sent), "the client's events must be exactly the apiserver's, in its order")
		Expect(delayed).To(BeNumerically(">", n/2), "the rules must really have delayed events")

		bookmark := slices.IndexFunc(got, func(r received) bool { return r.initialEnd })
		Expect(bookmark).To(BeNumerically(">=", 0), "the initial-events-end bookmark must arrive")
		lastAdded := -1
		for i, r := range got {
			if r.typ == "ADDED" {
				lastAdded = i
			}
		}
		Expect(bookmark).To(BeNumerically(">", lastAdded), "the initial-events-end bookmark overtook a held ADDED event")
	})
})

var _ = Describe("drop", func() {
	It("never forwards a dropped event and keeps the stream open", func() {
		ctx := context.Background()
		ns := newNamespace()
		for _, name := range []string{"a", "b"} {
			Expect(direct.Create(ctx, configMaps.newObject(ns, name, "0"))).To(Succeed())
		}
		w := watchConfigMaps("drop", ns)

		Expect(px.SetRules(time.Now(), proxy.Rule{Client: "drop", Name: "a", Types: []string{"MODIFIED"}, Action: proxy.Drop})).To(Succeed())
		DeferCleanup(clearRules)
		update := func(name, v string) string { return updateConfigMap(ns, name, v) }
		droppedRV := update("a", "1")
		bRV := update("b", "1")
		got := collect(w, 10*time.Second, func(got []received) bool { return len(got) == 1 })
		Expect(got[0].String()).To(Equal("MODIFIED b@" + bRV))

		clearRules()
		aRV := update("a", "2")
		got = append(got, collect(w, 10*time.Second, func(got []received) bool { return len(got) == 1 })...)
		Expect(got[1].String()).To(Equal("MODIFIED a@"+aRV), "the stream must stay open after a drop")

		Expect(px.Trace().Since(trace.Cursor{}).Events).To(ContainElement(SatisfyAll(
			HaveField("Client", "drop"), HaveField("Name", "a"), HaveField("ResourceVersion", droppedRV), HaveField("Fate", trace.Dropped),
		)))
		Consistently(w.ResultChan()).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "the dropped event must never arrive late")
	})
})

var _ = Describe("two clients", func() {
	It("delays client A's view while client B's stays current", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, widgets.newObject(ns, "w", "0"))).To(Succeed())
		watchAs := func(name string) watch.Interface {
			c, err := px.Client(name)
			Expect(err).NotTo(HaveOccurred())
			dc := dynamic.NewForConfigOrDie(c.Config()).Resource(widgetGVR).Namespace(ns)
			list, err := dc.List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			w, err := dc.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(w.Stop)
			return w
		}
		a, b := watchAs("client-a"), watchAs("client-b")
		const hold = 2 * time.Second
		mark := time.Now()
		Expect(px.SetRules(mark, proxy.Rule{Client: "client-a", Resource: "widgets", Action: proxy.Hold, To: hold})).To(Succeed())
		DeferCleanup(clearRules)

		w := widgets.newObject(ns, "w", "")
		Expect(direct.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
		widgets.setValue(w, "1")
		Expect(direct.Update(ctx, w)).To(Succeed())

		gotB := collect(b, time.Second, func(got []received) bool { return len(got) == 1 })
		Expect(gotB[0].rv).To(Equal(w.GetResourceVersion()))
		Consistently(a.ResultChan()).WithTimeout(time.Until(mark.Add(hold))-200*time.Millisecond).ShouldNot(Receive(), "client A must not see the write during its hold")
		gotA := collect(a, 5*time.Second, func(got []received) bool { return len(got) == 1 })
		Expect(gotA[0].rv).To(Equal(w.GetResourceVersion()))
		Expect(gotA[0].at).To(BeTemporally(">=", mark.Add(hold)), "released when the hold window ended")
		Expect(gotA[0].at.Sub(gotB[0].at)).To(BeNumerically(">", hold/2), "client B saw it long before client A")
	})
})

var _ = Describe("Stop", func() {
	It("ends every stream and leaves no goroutine behind, even with events held", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, configMaps.newObject(ns, "x", "0"))).To(Succeed())
		before := goleak.IgnoreCurrent()

		p, cfg := privateProxy("leak")
		cs := kubernetes.NewForConfigOrDie(cfg)
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.SetRules(time.Now(), proxy.Rule{Action: proxy.Hold, To: time.Hour})).To(Succeed())
		cm := &corev1.ConfigMap{}
		Expect(direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, cm)).To(Succeed())
		cm.Data["value"] = "1"
		Expect(direct.Update(ctx, cm)).To(Succeed())
		Eventually(p.Pending).WithTimeout(5*time.Second).Should(Equal(1), "the update is held")

		stopped := make(chan error, 1)
		go func() { stopped <- p.Stop() }()
		Eventually(stopped).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
		Eventually(w.ResultChan()).WithTimeout(5 * time.Second).Should(BeClosed())
		w.Stop()
		cfg.Transport.(*http2Off).CloseIdleConnections()
		Expect(goleak.Find(before)).To(Succeed())
		_, err = p.Client("after-stop")
		Expect(err).To(MatchError(ContainSubstring("not running")))
	})
})

// privateProxy starts a proxy of the spec's own (the caller stops it) and
// returns it with a config for its named client that uses a private
// transport, so that no shared connection pool outlives the spec.
func privateProxy(name string) (*proxy.Proxy, *rest.Config) {
	GinkgoHelper()
	p := &proxy.Proxy{Upstream: cp.Config, Log: GinkgoLogr}
	Expect(p.Start()).To(Succeed())
	c, err := p.Client(name)
	Expect(err).NotTo(HaveOccurred())
	return p, privateTransport(c.Config())
}

// privateTransport gives cfg a private HTTP/1.1 transport (not client-go's
// shared one) that trusts what cfg trusts: the listener's certificate.
func privateTransport(cfg *rest.Config) *rest.Config {
	GinkgoHelper()
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(cfg.CAData)).To(BeTrue(), "the client's Config carries the proxy's certificate")
	cfg.Transport = &http2Off{tls: &tls.Config{RootCAs: pool}}
	cfg.TLSClientConfig = rest.TLSClientConfig{} // client-go takes TLS options or a transport, not both
	return cfg
}

// http2Off is a private HTTP/1.1 transport.
type http2Off struct {
	tls *tls.Config
	t   *http.Transport
}

func (h *http2Off) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.t == nil {
		h.t = &http.Transport{TLSClientConfig: h.tls}
	}
	return h.t.RoundTrip(r)
}

func (h *http2Off) CloseIdleConnections() {
	if h.t != nil {
		h.t.CloseIdleConnections()
	}
}

var _ = Describe("Fields", func() {
	It("records declared fields of JSON responses, so oracles can follow a value across writers", func() {
		ctx := context.Background()
		ns := newNamespace()
		p := &proxy.Proxy{Upstream: cp.Config, Fields: []string{"spec.value", "spec.absent"}}
		Expect(p.Start()).To(Succeed())
		DeferCleanup(p.Stop)
		c, err := p.Client("writer")
		Expect(err).NotTo(HaveOccurred())
		dc := dynamic.NewForConfigOrDie(c.Config()).Resource(widgetGVR).Namespace(ns)
		obj := widgets.newObject(ns, "w", "first").(*unstructured.Unstructured)
		_, err = dc.Create(ctx, obj, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = dc.Patch(ctx, "w", "application/merge-patch+json", []byte(`{"spec":{"value":"second"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		var got []string
		for _, r := range p.Trace().Since(trace.Cursor{}).Requests {
			if r.Resource == "widgets" {
				got = append(got, fmt.Sprintf("%s %v", r.Verb, r.Fields))
			}
		}
		Expect(got).To(Equal([]string{`create map[spec.value:"first"]`, `patch map[spec.value:"second"]`}))
	})
})

var _ = Describe("After", func() {
	It("lets the first N matching events pass, then applies the rule", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, configMaps.newObject(ns, "a", "0"))).To(Succeed())
		w := watchConfigMaps("after", ns)
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: "after", Types: []string{"MODIFIED"}, After: 2, Action: proxy.Drop})).To(Succeed())
		DeferCleanup(clearRules)
		var rvs []string
		for i := range 4 {
			rvs = append(rvs, updateConfigMap(ns, "a", fmt.Sprint(i+1)))
		}
		got := collect(w, 10*time.Second, func(got []received) bool { return len(got) == 2 })
		Expect([]string{got[0].rv, got[1].rv}).To(Equal(rvs[:2]), "the first two pass")
		Consistently(w.ResultChan()).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "the rest are dropped")
	})
})

// watchConfigMaps watches ConfigMaps in ns as the named proxy client, from the
// current resourceVersion on.
func watchConfigMaps(clientName, ns string) watch.Interface {
	GinkgoHelper()
	c, err := px.Client(clientName)
	Expect(err).NotTo(HaveOccurred())
	cs := kubernetes.NewForConfigOrDie(c.Config())
	list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	return w
}

// updateConfigMap sets data.value of ns/name directly and returns the new
// resourceVersion.
func updateConfigMap(ns, name, v string) string {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Expect(direct.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
	cm.Data["value"] = v
	Expect(direct.Update(context.Background(), cm)).To(Succeed())
	return cm.ResourceVersion
}
