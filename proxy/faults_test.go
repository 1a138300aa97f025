package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// seen is what an informer's handlers were told, in order: "name=value".
type seen struct {
	mu  sync.Mutex
	got []string
}

func (s *seen) add(obj any) {
	var name, v string
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		name, v = o.Name, o.Data["value"]
	case *unstructured.Unstructured:
		name = o.GetName()
		v, _, _ = unstructured.NestedString(o.Object, "spec", "value")
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, name+"="+v)
}

func (s *seen) values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// informer is a plain client-go informer (WatchList on, as client-go 0.37
// has it by default) for kind in ns, through the named proxy client.
type informer struct {
	store toolscache.Store
	seen  *seen
}

func startInformer(clientName, ns string, kind kindUnderTest) *informer {
	GinkgoHelper()
	c, err := px.Client(clientName)
	Expect(err).NotTo(HaveOccurred())
	cfg := c.Config()
	var inf toolscache.SharedIndexInformer
	if kind.contentType == protobuf {
		cfg.ContentType = protobuf
		cfg.AcceptContentTypes = protobuf + ",application/json"
		f := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, informers.WithNamespace(ns))
		inf = f.Core().V1().ConfigMaps().Informer()
	} else {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, ns, nil)
		inf = f.ForResource(widgetGVR).Informer()
	}
	s := &seen{}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.add,
		UpdateFunc: func(_, obj any) { s.add(obj) },
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	DeferCleanup(func() { cancel(); <-done })
	Eventually(inf.HasSynced).WithTimeout(10*time.Second).Should(BeTrue(), "informer %s synced", clientName)
	return &informer{store: inf.GetStore(), seen: s}
}

// values is the informer's store as "name=value", sorted by name.
func (i *informer) values() map[string]string {
	out := map[string]string{}
	for _, obj := range i.store.List() {
		s := &seen{}
		s.add(obj)
		if len(s.got) == 1 {
			name, v, _ := strings.Cut(s.got[0], "=")
			out[name] = v
		}
	}
	return out
}

// serverValues is the apiserver's current state of kind in ns.
func serverValues(ns string, kind kindUnderTest) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		o := kind.newObject(ns, name, "")
		if err := direct.Get(context.Background(), client.ObjectKeyFromObject(o), o); err == nil {
			out[name] = kind.value(o)
		}
	}
	return out
}

// newNamespaceWithABC is a fresh namespace holding objects a, b and c of
// kind, each with value "0".
func newNamespaceWithABC(kind kindUnderTest) string {
	GinkgoHelper()
	ns := newNamespace()
	for _, n := range []string{"a", "b", "c"} {
		Expect(direct.Create(context.Background(), kind.newObject(ns, n, "0"))).To(Succeed())
	}
	return ns
}

func setValue(ns, name, v string, kind kindUnderTest) string {
	GinkgoHelper()
	o := kind.newObject(ns, name, "")
	Expect(direct.Get(context.Background(), client.ObjectKeyFromObject(o), o)).To(Succeed())
	kind.setValue(o, v)
	Expect(direct.Update(context.Background(), o)).To(Succeed())
	return o.GetResourceVersion()
}

func requestsOf(clientName string) []trace.Request {
	return ofClient(px.Trace().Since(trace.Cursor{}).Requests, func(r trace.Request) string { return r.Client }, clientName)
}

func eventsOf(clientName string) []trace.Event {
	return ofClient(px.Trace().Since(trace.Cursor{}).Events, func(e trace.Event) string { return e.Client }, clientName)
}

// ofClient keeps the entries of the named client.
func ofClient[T any](all []T, client func(T) string, name string) []T {
	var out []T
	for _, x := range all {
		if client(x) == name {
			out = append(out, x)
		}
	}
	return out
}

var _ = Describe("Break", func() {
	for _, kind := range []kindUnderTest{configMaps, widgets} {
		It(fmt.Sprintf("ends a %s watch before the first matching event; the informer re-watches and the apiserver's replay leaves nothing lost", kind.resource), func() {
			ns := newNamespaceWithABC(kind)
			name := "break-" + kind.resource
			inf := startInformer(name, ns, kind)
			// The first MODIFIED passes: client-go relists instead of
			// re-watching when a watch ends within 1 s having delivered no
			// event (reflector.go, VeryShortWatchError).
			Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: kind.resource, Namespace: ns, Types: []string{"MODIFIED"}, After: 1, Action: proxy.Break})).To(Succeed())
			DeferCleanup(clearRules)

			setValue(ns, "a", "1", kind)
			brokenRV := setValue(ns, "b", "1", kind)
			setValue(ns, "a", "2", kind)

			Eventually(inf.values).WithTimeout(10*time.Second).Should(Equal(serverValues(ns, kind)), "after the break the store equals the server's state")
			Expect(inf.seen.values()[3:]).To(Equal([]string{"a=1", "b=1", "a=2"}), "every state is observed once, in order, with no relist: the replay delivered them")

			var broken trace.Event
			for _, e := range eventsOf(name) {
				if e.Fate == trace.Broken {
					broken = e
				}
			}
			Expect(broken.ResourceVersion).To(Equal(brokenRV), "the stream ended just before the first MODIFIED")
			var watches []trace.Request
			for _, r := range requestsOf(name) {
				if r.Verb == "watch" && r.Code == 200 {
					watches = append(watches, r)
				}
			}
			Expect(len(watches)).To(BeNumerically(">=", 2), "the informer watched again")
			rewatch := watches[len(watches)-1]
			Expect(rewatch.SentRV).NotTo(BeEmpty(), "the re-watch resumes from the last resourceVersion it saw")
			Expect(rewatch.Start).To(BeTemporally(">", broken.Arrived))
			replayed := false
			for _, e := range eventsOf(name) {
				if e.ResourceVersion == brokenRV && e.Fate == trace.Released && e.Stream != broken.Stream {
					replayed = true
				}
			}
			Expect(replayed).To(BeTrue(), "the apiserver replayed the event on the new stream")
		})
	}
})

var _ = Describe("Expire", func() {
	for _, kind := range []kindUnderTest{configMaps, widgets} {
		It(fmt.Sprintf("answers the %s re-watch with the apiserver's own 410; the informer relists and never sees the states in between", kind.resource), func() {
			ns := newNamespaceWithABC(kind)
			name := "expire-" + kind.resource
			inf := startInformer(name, ns, kind)
			Expect(px.SetRules(time.Now(),
				proxy.Rule{Client: name, Resource: kind.resource, Namespace: ns, Types: []string{"MODIFIED"}, After: 1, Action: proxy.Break},
				proxy.Rule{Client: name, Resource: kind.resource, Namespace: ns, Action: proxy.Expire},
			)).To(Succeed())
			DeferCleanup(clearRules)

			// The break comes at b=1; a changes twice more before the
			// reflector's backoff (at least 0.8 s) lets it relist.
			setValue(ns, "a", "1", kind)
			setValue(ns, "b", "1", kind)
			setValue(ns, "a", "2", kind)
			setValue(ns, "a", "3", kind)

			Eventually(inf.values).WithTimeout(10*time.Second).Should(Equal(serverValues(ns, kind)), "after the relist the store equals the server's state")
			Expect(inf.seen.values()).To(ContainElements("a=1", "b=1", "a=3"))
			Expect(inf.seen.values()).NotTo(ContainElement("a=2"), "the intermediate state a=2 is never observed: the relist coalesced it")

			var expired *trace.Request
			reqs := requestsOf(name)
			n := 0
			for i, r := range reqs {
				if r.FaultKind == trace.FaultExpire {
					expired = &reqs[i]
					n++
				}
			}
			Expect(expired).NotTo(BeNil(), "a re-watch was expired")
			Expect(n).To(Equal(1), "only the re-watch from before the relist meets 410: the watch from the relist's fresh resourceVersion is within the apiserver's watch cache")
			Expect(expired.Verb).To(Equal("watch"))
			var gone bool
			for _, e := range eventsOf(name) {
				if e.Type == "ERROR" && e.Fate == trace.Released && !e.Arrived.Before(expired.Start) {
					gone = true
				}
			}
			Expect(gone).To(BeTrue(), "the apiserver's 410 ERROR event reached the informer")
			relisted := false
			for _, r := range reqs {
				if r.Start.After(expired.Start) && (r.Verb == "list" || r.Verb == "watch") && r.FaultKind == "" && r.Code == 200 {
					relisted = true
				}
			}
			Expect(relisted).To(BeTrue(), "the informer listed again after the 410")
		})
	}
})

var _ = Describe("Rewind", func() {
	for _, kind := range []kindUnderTest{configMaps, widgets} {
		It(fmt.Sprintf("serves a %s LIST from the past through the real apiserver; an informer shows the old value, then the current one with no further write", kind.resource), func() {
			ctx := context.Background()
			ns := newNamespace()
			Expect(direct.Create(ctx, kind.newObject(ns, "a", "old"))).To(Succeed())
			// Another client's watch feeds the proxy's resourceVersion clock,
			// as the controllers' watches do in an execution.
			observer := startInformer("rewind-observer-"+kind.resource, ns, kind)
			Eventually(observer.values).WithTimeout(5 * time.Second).Should(HaveKeyWithValue("a", "old"))
			mark := time.Now() // after the proxy saw "old": the observer has it

			newRV := setValue(ns, "a", "new", kind)
			Eventually(observer.values).WithTimeout(5 * time.Second).Should(HaveKeyWithValue("a", "new"))

			name := "rewind-" + kind.resource
			Expect(px.SetRules(mark, proxy.Rule{Client: name, Resource: kind.resource, Namespace: ns, Action: proxy.Rewind, To: time.Hour})).To(Succeed())
			DeferCleanup(clearRules)

			By("a plain LIST")
			c, err := px.Client(name)
			Expect(err).NotTo(HaveOccurred())
			dyn := dynamic.NewForConfigOrDie(c.Config())
			gvr := widgetGVR
			if kind.resource == "configmaps" {
				gvr = corev1.SchemeGroupVersion.WithResource("configmaps")
			}
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(HaveLen(1))
			old := kind.newObject(ns, "a", "")
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[0].Object, old)).To(Succeed())
			Expect(kind.value(old)).To(Equal("old"), "the list is the past")
			Expect(list.GetResourceVersion()).NotTo(Equal(newRV))
			Expect(serverValues(ns, kind)).To(HaveKeyWithValue("a", "new"), "the server no longer has it")

			By("a consistent LIST (no resourceVersion), which no apiserver serves from the past")
			current, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(current.Items).To(HaveLen(1))
			now := kind.newObject(ns, "a", "")
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(current.Items[0].Object, now)).To(Succeed())
			Expect(kind.value(now)).To(Equal("new"), "a consistent list is the present")

			By("a LIST at the current resourceVersion (NotOlderThan, as a relist after 410 sends), which no apiserver serves older than it asks")
			floor, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: newRV})
			Expect(err).NotTo(HaveOccurred())
			Expect(floor.Items).To(HaveLen(1))
			atFloor := kind.newObject(ns, "a", "")
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(floor.Items[0].Object, atFloor)).To(Succeed())
			Expect(kind.value(atFloor)).To(Equal("new"), "a list at resourceVersion=X is not older than X")
			Expect(requestsOf(name)).To(ContainElement(HaveField("Fault", ContainSubstring("its own resourceVersion"))), "the trace says why the list was not rewound further")

			By("an informer, whose WatchList is refused so that it falls back to LIST")
			inf := startInformer(name, ns, kind)
			Eventually(inf.values).WithTimeout(10 * time.Second).Should(HaveKeyWithValue("a", "new"))
			Expect(inf.seen.values()).To(Equal([]string{"a=old", "a=new"}), "old, then current, with no further write")
			var refused, rewound bool
			for _, r := range requestsOf(name) {
				if r.Verb == "watch" && r.Code == 422 && r.FaultKind == trace.FaultRewind {
					refused = true
				}
				if r.Verb == "list" && r.Code == 200 && r.FaultKind == trace.FaultRewind && strings.HasPrefix(r.Fault, "rewind: list served as of") && !strings.Contains(r.Fault, "its own resourceVersion") {
					rewound = true
					Expect(r.ReturnedRV).NotTo(Equal(newRV))
				}
			}
			Expect(refused).To(BeTrue(), "the WatchList request was refused: %v", requestsOf(name))
			Expect(rewound).To(BeTrue(), "the fallback LIST was served from the past: %v", requestsOf(name))
		})
	}
})

var _ = Describe("Cut and Freeze", func() {
	It("applies a cut write, withholds its answer, and holds the client's later requests until thawed", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, configMaps.newObject(ns, "a", "0"))).To(Succeed())
		name := "cutter"
		c, err := px.Client(name)
		Expect(err).NotTo(HaveOccurred())
		cl, err := client.New(c.Config(), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: "configmaps", Verbs: []string{"patch"}, After: 1, Action: proxy.Cut})).To(Succeed())
		DeferCleanup(clearRules)

		patch := func(v string) error {
			cm := configMaps.newObject(ns, "a", "")
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			return cl.Patch(pctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"value":"`+v+`"}}`)))
		}
		Expect(patch("1")).To(Succeed(), "the first patch passes (After: 1)")
		Expect(patch("2")).To(MatchError(ContainSubstring("context deadline exceeded")), "the second is cut: no answer")
		Expect(serverValues(ns, configMaps)).To(HaveKeyWithValue("a", "2"), "yet the apiserver applied it")
		Expect(patch("3")).To(HaveOccurred(), "the client is frozen")
		Expect(serverValues(ns, configMaps)).To(HaveKeyWithValue("a", "2"), "and nothing it sends while frozen reaches the apiserver")

		var cut, frozen bool
		for _, r := range requestsOf(name) {
			if r.FaultKind == trace.FaultCut {
				cut = true
				Expect(r.Code).To(Equal(200), "the trace has the answer the client never got")
			}
			if r.FaultKind == trace.FaultFrozen {
				frozen = true
			}
		}
		Expect(cut && frozen).To(BeTrue(), "trace: %v", requestsOf(name))

		px.Thaw(name)
		Expect(patch("4")).To(Succeed(), "thawed, and the Cut rule fired once already")
		Expect(serverValues(ns, configMaps)).To(HaveKeyWithValue("a", "4"))
	})
})

var _ = Describe("Expire's 410", func() {
	It("is byte for byte the ERROR event kube-apiserver sends for a resourceVersion its watch cache no longer holds", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, widgets.newObject(ns, "a", "0"))).To(Succeed())
		// Straight to the apiserver: the Widget watch cache began long after
		// resourceVersion 1, so a watch from it meets the genuine 410.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cp.Config.Host, "/")+"/apis/test.stalefuzz.dev/v1/namespaces/"+ns+"/widgets?watch=true&resourceVersion=1", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Accept", "application/json")
		rt, err := rest.TransportFor(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		genuine, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(200), "GET %s: %s", req.URL, genuine)
		m := regexp.MustCompile(`too old resource version: 1 \((\d+)\)`).FindSubmatch(genuine)
		Expect(m).NotTo(BeNil(), "the apiserver's answer: %s", genuine)

		ct, frame := proxy.ExpiredWatch("application/json", widgetGVR.GroupVersion(), "1", string(m[1]))
		Expect(ct).To(Equal(resp.Header.Get("Content-Type")))
		Expect(string(frame)).To(Equal(string(genuine)))

		By("and in protobuf, what client-go decodes as the same 410")
		ct, frame = proxy.ExpiredWatch(protobuf+", application/json", corev1.SchemeGroupVersion, "7", "9")
		Expect(ct).To(Equal(protobuf + ";stream=watch"))
		si, ok := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), protobuf)
		Expect(ok).To(BeTrue())
		dec := streaming.NewDecoder(si.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(frame))), si.StreamSerializer.Serializer)
		var ev metav1.WatchEvent
		_, _, err = dec.Decode(nil, &ev)
		Expect(err).NotTo(HaveOccurred())
		Expect(ev.Type).To(Equal("ERROR"))
		obj, err := runtime.Decode(clientgoscheme.Codecs.UniversalDeserializer(), ev.Object.Raw)
		Expect(err).NotTo(HaveOccurred())
		status := apierrors.FromObject(obj)
		Expect(apierrors.IsResourceExpired(status)).To(BeTrue(), "%v", status)
		Expect(status.Error()).To(Equal("too old resource version: 7 (9)"))
	})
})

var _ = Describe("Stop with a frozen client", func() {
	It("ends the held requests and leaves no goroutine behind", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, configMaps.newObject(ns, "a", "0"))).To(Succeed())
		before := goleak.IgnoreCurrent()

		p, cfg := privateProxy("frozen")
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.SetRules(time.Now(), proxy.Rule{Client: "frozen", Action: proxy.Cut})).To(Succeed())

		patched := make(chan error, 2)
		patch := func(v string) {
			patched <- cl.Patch(ctx, configMaps.newObject(ns, "a", ""), client.RawPatch("application/merge-patch+json", []byte(`{"data":{"value":"`+v+`"}}`)))
		}
		go patch("1") // cut
		Eventually(func() int {
			n := 0
			for _, r := range p.Trace().Since(trace.Cursor{}).Requests {
				if r.FaultKind == trace.FaultCut {
					n++
				}
			}
			return n
		}).WithTimeout(5 * time.Second).Should(Equal(1))
		go patch("2") // held: the client is frozen
		Consistently(patched).WithTimeout(200*time.Millisecond).ShouldNot(Receive(), "no answer reaches the client")

		stopped := make(chan error, 1)
		go func() { stopped <- p.Stop() }()
		Eventually(stopped).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
		Eventually(patched).WithTimeout(5 * time.Second).Should(Receive(HaveOccurred()))
		Eventually(patched).WithTimeout(5 * time.Second).Should(Receive(HaveOccurred()))
		cfg.Transport.(*http2Off).CloseIdleConnections()
		Expect(goleak.Find(before)).To(Succeed())
	})
})
