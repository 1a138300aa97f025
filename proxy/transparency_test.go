package proxy_test

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Specs of the proxy's transparency: what kubectl and other clients send
// besides informer traffic gets the apiserver's own answer, as it would
// directly.

// kubectlTable is the Accept header of kubectl get (and get -w): server-side
// printing.
const kubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// plainHTTP returns an HTTP/1.1 client of the spec's own that sends exactly
// the headers it is given (no Accept-Encoding of its own, no transparent
// decompression), and gives each exchange, body included, 30 seconds.
// plainHTTP is an HTTP client of c's listener that carries c's token and
// nothing else of client-go.
func plainHTTP(c *proxy.Client) *http.Client {
	t := listenerTransport(c)
	t.DisableCompression = true
	return &http.Client{Transport: asClient(c, t), Timeout: 30 * time.Second}
}

// listenerTransport is a plain transport that trusts c's listener's
// certificate (the proxy's own), HTTP/1.1 as the listener speaks.
func listenerTransport(c *proxy.Client) *http.Transport {
	GinkgoHelper()
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(c.Config().CAData)).To(BeTrue(), "the client's Config carries the proxy's certificate")
	t := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	DeferCleanup(t.CloseIdleConnections)
	return t
}

// asClient sends what rt sends with c's bearer token, as c's Config does.
func asClient(c *proxy.Client, rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+c.Config().BearerToken)
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var _ = Describe("a watch that asks for Table output (kubectl get -w)", func() {
	It("is traced with each event's namespace and name, and a Name rule holds only that object's events", func() {
		ctx := context.Background()
		ns := newNamespace()
		const clientName = "table-watch"
		c, err := px.Client(clientName)
		Expect(err).NotTo(HaveOccurred())
		hc := plainHTTP(c)

		By("listing as kubectl get does, then watching from the list's resourceVersion")
		get := func(ctx context.Context, query string) *http.Response {
			GinkgoHelper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/api/v1/namespaces/"+ns+"/configmaps"+query, nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Accept", kubectlTable)
			resp, err := hc.Do(req)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			return resp
		}
		resp := get(ctx, "?limit=500")
		var list metav1.Table
		Expect(json.NewDecoder(resp.Body).Decode(&list)).To(Succeed())
		Expect(resp.Body.Close()).To(Succeed())

		Expect(px.SetRules(time.Now(), proxy.Rule{Client: clientName, Resource: "configmaps", Namespace: ns, Name: "held", Action: proxy.Hold, To: time.Minute})).To(Succeed())
		DeferCleanup(clearRules)
		watchCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		resp = get(watchCtx, "?resourceVersion="+list.ResourceVersion+"&watch=true")
		Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
		got := make(chan string, 10)
		go func() {
			defer GinkgoRecover()
			defer resp.Body.Close()
			dec := json.NewDecoder(resp.Body)
			for {
				var ev struct {
					Type   string
					Object metav1.Table
				}
				if dec.Decode(&ev) != nil {
					return // the spec ended
				}
				var row metav1.PartialObjectMetadata
				Expect(ev.Object.Rows).To(HaveLen(1), "a watch event's Table has one row")
				Expect(json.Unmarshal(ev.Object.Rows[0].Object.Raw, &row)).To(Succeed())
				got <- ev.Type + " " + row.Namespace + "/" + row.Name
			}
		}()

		// In this order: nothing overtakes a held event.
		for _, name := range []string{"free", "held"} {
			Expect(direct.Create(ctx, configMaps.newObject(ns, name, "0"))).To(Succeed())
		}
		Eventually(got).WithTimeout(10*time.Second).Should(Receive(Equal("ADDED "+ns+"/free")), "the other object's event passes")
		Consistently(got).WithTimeout(500*time.Millisecond).ShouldNot(Receive(), "the held object's event must stay at the proxy")

		By("the trace says which object each event was about")
		var events []string
		for _, e := range px.Trace().Since(trace.Cursor{}).Events {
			if e.Client == clientName && e.Type == "ADDED" {
				events = append(events, fmt.Sprintf("%s %s/%s %s rule=%d", e.Kind, e.Namespace, e.Name, e.Fate, e.Rule))
			}
		}
		Expect(events).To(Equal([]string{
			"Table " + ns + "/free released rule=-1",
			"Table " + ns + "/held pending rule=0",
		}))
	})
})

var _ = Describe("a gzip-encoded response", func() {
	It("is traced with its resourceVersion and Fields, and reaches the client still compressed and intact", func() {
		ctx := context.Background()
		ns := newNamespace()
		// The apiserver compresses responses over 128 KiB for clients that
		// accept gzip: 48 ConfigMaps of 4 KiB each make a list of about 200 KiB.
		for i := range 48 {
			Expect(direct.Create(ctx, configMaps.newObject(ns, fmt.Sprintf("big-%02d", i), strings.Repeat("x", 4<<10)))).To(Succeed())
		}
		p := &proxy.Proxy{Upstream: cp.Config, Log: GinkgoLogr, Fields: []string{"kind"}}
		Expect(p.Start()).To(Succeed())
		DeferCleanup(p.Stop)
		c, err := p.Client("gzip")
		Expect(err).NotTo(HaveOccurred())
		hc := plainHTTP(c)

		for _, accept := range []string{"application/json", protobuf} {
			By("listing as " + accept + " with Accept-Encoding: gzip")
			start := p.Trace().Cursor()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/api/v1/namespaces/"+ns+"/configmaps", nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Accept", accept)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := hc.Do(req)
			Expect(err).NotTo(HaveOccurred())
			compressed, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Body.Close()).To(Succeed())
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			Expect(resp.Header.Get("Content-Encoding")).To(Equal("gzip"), "%s list of %d bytes: the apiserver must have compressed it, or this spec tests nothing", accept, len(compressed))
			zr, err := gzip.NewReader(bytes.NewReader(compressed))
			Expect(err).NotTo(HaveOccurred())
			plain, err := io.ReadAll(zr)
			Expect(err).NotTo(HaveOccurred(), "the client must get the apiserver's gzip stream intact")
			Expect(len(plain)).To(BeNumerically(">", 128<<10))
			obj, err := runtime.Decode(clientgoscheme.Codecs.UniversalDeserializer(), plain)
			Expect(err).NotTo(HaveOccurred())
			list := obj.(*corev1.ConfigMapList)
			Expect(list.Items).To(HaveLen(48))

			reqs := p.Trace().Since(start).Requests
			Expect(reqs).To(HaveLen(1))
			Expect(reqs[0].ReturnedRV).To(Equal(list.ResourceVersion), "%s: the trace's returned resourceVersion", accept)
			if accept == "application/json" {
				Expect(reqs[0].Fields).To(Equal(map[string]string{"kind": `"ConfigMapList"`}))
			}
		}

		By("listing with client-go, whose transport asks for gzip on its own, as every informer's list does")
		start := p.Trace().Cursor()
		cfg := privateTransport(c.Config())
		DeferCleanup(func() { cfg.Transport.(*http2Off).CloseIdleConnections() })
		list, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		reqs := p.Trace().Since(start).Requests
		Expect(reqs).To(HaveLen(1))
		Expect(reqs[0].ReturnedRV).To(Equal(list.ResourceVersion))
	})
})

// podBackend is a local HTTP server standing in for a pod's container. The
// Pod's status (written through the status subresource, as a kubelet would)
// gives this machine's address as its IP, so that the apiserver's pod proxy,
// /api/v1/namespaces/NS/pods/NAME:PORT/proxy/..., reaches the server. The
// apiserver refuses to proxy to a loopback address.
type podBackend struct {
	ns, pod string
	port    int
	// release lets /stream write its second line.
	release chan struct{}
}

// startPodBackend serves
//   - /stream: "first\n", flushed, then "second\n" once release is closed;
//   - /echo: a switch to the protocol the request's Upgrade header names,
//     then every byte received is sent back.
func startPodBackend(ns string) *podBackend {
	GinkgoHelper()
	ip := hostIP()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	Expect(err).NotTo(HaveOccurred())
	b := &podBackend{ns: ns, pod: "backend", port: ln.Addr().(*net.TCPAddr).Port, release: make(chan struct{})}
	var mu sync.Mutex
	var hijacked []net.Conn
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "first\n")
			_ = http.NewResponseController(w).Flush()
			select {
			case <-b.release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "second\n")
		case "/echo":
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			mu.Lock()
			hijacked = append(hijacked, conn)
			mu.Unlock()
			defer conn.Close()
			_, _ = fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
			if brw.Flush() == nil {
				_, _ = io.Copy(conn, brw)
			}
		default:
			http.NotFound(w, r)
		}
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	DeferCleanup(func() {
		_ = srv.Close() // leaves hijacked connections open
		mu.Lock()
		for _, c := range hijacked {
			_ = c.Close()
		}
		mu.Unlock()
		<-served
	})

	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b.pod},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "stand-in"}}},
	}
	Expect(direct.Create(ctx, pod)).To(Succeed())
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	Expect(direct.Status().Update(ctx, pod)).To(Succeed())
	return b
}

// path is the apiserver's pod proxy path to p on the backend.
func (b *podBackend) path(p string) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%d/proxy%s", b.ns, b.pod, b.port, p)
}

// hostIP is a non-loopback IPv4 address of this machine.
func hostIP() string {
	GinkgoHelper()
	addrs, err := net.InterfaceAddrs()
	Expect(err).NotTo(HaveOccurred())
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	Skip("this machine has no non-loopback IPv4 address, and the apiserver refuses to proxy to a pod on a loopback one")
	return ""
}

// requestsOfClient returns the requests of the named client recorded in p's
// trace after start.
func requestsOfClient(p *proxy.Proxy, start trace.Cursor, name string) []trace.Request {
	var out []trace.Request
	for _, r := range p.Trace().Since(start).Requests {
		if r.Client == name {
			out = append(out, r)
		}
	}
	return out
}

var _ = Describe("a streaming response that is not a watch (a pod proxy stream, kubectl logs -f)", func() {
	It("flows to the client as it arrives, and is recorded when its headers arrive", func() {
		ns := newNamespace()
		b := startPodBackend(ns)
		const clientName = "stream"
		c, err := px.Client(clientName)
		Expect(err).NotTo(HaveOccurred())
		start := px.Trace().Cursor()

		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+b.path("/stream"), nil)
		Expect(err).NotTo(HaveOccurred())
		hc := plainHTTP(c)
		lines := make(chan string, 3)
		go func() {
			resp, err := hc.Do(req)
			if err != nil {
				lines <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					lines <- fmt.Sprintf("%d end: %v", resp.StatusCode, err)
					return
				}
				lines <- line
			}
		}()
		Eventually(lines).WithTimeout(10*time.Second).Should(Receive(Equal("first\n")), "the first line must reach the client while the pod has not written the second")
		Expect(requestsOfClient(px, start, clientName)).To(ConsistOf(SatisfyAll(
			HaveField("Verb", "get"), HaveField("Resource", "pods"), HaveField("Subresource", "proxy"),
			HaveField("Name", fmt.Sprintf("%s:%d", b.pod, b.port)), HaveField("Code", http.StatusOK),
		)), "recorded when its headers arrived, before the stream ended")

		close(b.release)
		Eventually(lines).WithTimeout(10 * time.Second).Should(Receive(Equal("second\n")))
		Eventually(lines).WithTimeout(10 * time.Second).Should(Receive(Equal("200 end: EOF")))
	})
})

// upgradeRequest is a request to switch protocols, as kubectl sends it.
type upgradeRequest struct {
	method, subresource, query string
	header                     map[string]string
}

func (u upgradeRequest) new(ctx context.Context, base, path string) *http.Request {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, u.method, strings.TrimSuffix(base, "/")+path+"?"+u.query, nil)
	Expect(err).NotTo(HaveOccurred())
	for k, v := range u.header {
		req.Header.Set(k, v)
	}
	return req
}

// The headers of kubectl v1.37's exec, attach and port-forward: WebSocket
// first, SPDY as its fallback (and older clients' only protocol).
var (
	spdy = func(protocol string) map[string]string {
		return map[string]string{"Connection": "Upgrade", "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": protocol}
	}
	websocket = func(protocol string) map[string]string {
		return map[string]string{
			"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": protocol,
		}
	}
)

// directHTTP1 returns a transport of the spec's own straight to the
// apiserver, HTTP/1.1 only, as client-go's SPDY and WebSocket dialers use.
func directHTTP1() http.RoundTripper {
	GinkgoHelper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.NextProtos = []string{"http/1.1"}
	cfg.Dial = (&net.Dialer{}).DialContext // a transport of its own, not client-go's shared one
	rt, err := rest.TransportFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { utilnet.CloseIdleConnectionsFor(rt) })
	return rt
}

// answer is a response as a client sees it.
func answer(resp *http.Response, err error) string {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return fmt.Sprintf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
}

var _ = Describe("an exec, attach or port-forward the apiserver refuses", func() {
	DescribeTable("gets the apiserver's own answer through the proxy, as it does directly, and is traced with it",
		func(u upgradeRequest, verb string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // every exchange's budget
			DeferCleanup(cancel)
			ns := newNamespace()
			// envtest has no kubelet: the apiserver refuses a pod without a
			// node (400) and one on a node it does not know (404) itself.
			for _, spec := range []corev1.PodSpec{{}, {NodeName: "nowhere"}} {
				spec.Containers = []corev1.Container{{Name: "c", Image: "stand-in"}}
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-" + cmp.Or(spec.NodeName, "no-node")}, Spec: spec}
				Expect(direct.Create(ctx, pod)).To(Succeed())
			}
			clientName := "upgrade-" + u.subresource + "-" + strings.ToLower(u.header["Upgrade"])
			c, err := px.Client(clientName)
			Expect(err).NotTo(HaveOccurred())
			viaProxy, straight := asClient(c, listenerTransport(c)), directHTTP1()
			start := px.Trace().Cursor()

			var codes []int
			for _, pod := range []string{"on-no-node", "on-nowhere"} {
				path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/%s", ns, pod, u.subresource)
				want := answer(straight.RoundTrip(u.new(ctx, cp.Config.Host, path)))
				Expect(want).To(MatchRegexp(`^4\d\d application/json \{"kind":"Status"`), "%s directly: the apiserver's own refusal", pod)
				got := answer(viaProxy.RoundTrip(u.new(ctx, c.URL, path)))
				Expect(got).To(Equal(want), "%s %s %s through the proxy: status, media type and body as directly", u.method, pod, u.subresource)
				var code int
				_, _ = fmt.Sscan(want, &code)
				codes = append(codes, code)
			}

			var traced []string
			for _, r := range requestsOfClient(px, start, clientName) {
				traced = append(traced, fmt.Sprintf("%s %s/%s %s %d", r.Verb, r.Resource, r.Subresource, r.Name, r.Code))
			}
			Expect(traced).To(Equal([]string{
				fmt.Sprintf("%s pods/%s on-no-node %d", verb, u.subresource, codes[0]),
				fmt.Sprintf("%s pods/%s on-nowhere %d", verb, u.subresource, codes[1]),
			}))
		},
		Entry("exec over SPDY", upgradeRequest{"POST", "exec", "command=date&container=c&stdout=true&stderr=true", spdy("v4.channel.k8s.io")}, "create"),
		Entry("exec over WebSocket", upgradeRequest{"GET", "exec", "command=date&container=c&stdout=true&stderr=true", websocket("v5.channel.k8s.io")}, "get"),
		Entry("attach over SPDY", upgradeRequest{"POST", "attach", "container=c&stdout=true", spdy("v4.channel.k8s.io")}, "create"),
		Entry("port-forward over SPDY", upgradeRequest{"POST", "portforward", "ports=80", spdy("portforward.k8s.io")}, "create"),
		Entry("port-forward over WebSocket", upgradeRequest{"GET", "portforward", "ports=80", websocket("SPDY/3.1+portforward.k8s.io")}, "get"),
	)
})

// openUpgraded switches a connection to the backend's echo protocol through
// the pod proxy, via the given proxy client, and checks that it relays both
// ways.
func openUpgraded(c *proxy.Client, b *podBackend, upgrade string) io.ReadWriteCloser {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel) // after the connection is closed
	t := listenerTransport(c)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+b.path("/echo"), nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgrade)
	req.Header.Set("Authorization", "Bearer "+c.Config().BearerToken)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := t.RoundTrip(req)
		done <- result{resp, err}
	}()
	var res result
	Eventually(done).WithTimeout(10*time.Second).Should(Receive(&res), "the answer to an upgrade the apiserver accepts must reach the client")
	Expect(res.err).NotTo(HaveOccurred())
	Expect(res.resp.StatusCode).To(Equal(http.StatusSwitchingProtocols))
	Expect(res.resp.Header.Get("Upgrade")).To(Equal(upgrade))
	conn, ok := res.resp.Body.(io.ReadWriteCloser)
	Expect(ok).To(BeTrue(), "the body of a 101 is the connection")
	DeferCleanup(func() { _ = conn.Close() }) // a spec may have closed it

	echoed := make(chan string, 1)
	go func() {
		buf := make([]byte, len("ping\n"))
		_, err := io.ReadFull(conn, buf)
		echoed <- fmt.Sprintf("%q %v", buf, err)
	}()
	_, err = io.WriteString(conn, "ping\n")
	Expect(err).NotTo(HaveOccurred())
	Eventually(echoed).WithTimeout(10*time.Second).Should(Receive(Equal(`"ping\n" <nil>`)), "the upgraded connection relays both ways")
	return conn
}

var _ = Describe("an upgrade the apiserver accepts", func() {
	DescribeTable("reaches the client as 101 Switching Protocols, relays both ways, and is traced with its 101",
		func(upgrade string) {
			ns := newNamespace()
			b := startPodBackend(ns)
			clientName := "upgraded-" + strings.ToLower(upgrade)
			c, err := px.Client(clientName)
			Expect(err).NotTo(HaveOccurred())
			start := px.Trace().Cursor()
			openUpgraded(c, b, upgrade)
			Expect(requestsOfClient(px, start, clientName)).To(ConsistOf(SatisfyAll(
				HaveField("Verb", "get"), HaveField("Resource", "pods"), HaveField("Subresource", "proxy"),
				HaveField("Code", http.StatusSwitchingProtocols),
			)))
		},
		Entry("WebSocket through a pod proxy", "websocket"),
		// Go's HTTP/2 transport refuses any Upgrade but websocket.
		Entry("SPDY/3.1 through a pod proxy", "SPDY/3.1"),
	)

	DescribeTable("is closed by Stop, which returns promptly and leaves no goroutine behind",
		func(upgrade string) {
			ns := newNamespace()
			b := startPodBackend(ns)
			before := goleak.IgnoreCurrent()
			p, _ := privateProxy("upgraded-stop")
			DeferCleanup(p.Stop) // idempotent: for a spec that fails before it stops the proxy
			c, err := p.Client("upgraded-stop")
			Expect(err).NotTo(HaveOccurred())
			conn := openUpgraded(c, b, upgrade)
			closed := make(chan error, 1)
			go func() {
				_, err := conn.Read(make([]byte, 1))
				closed <- err
			}()

			stopped := make(chan error, 1)
			go func() { stopped <- p.Stop() }()
			Eventually(stopped).WithTimeout(10*time.Second).Should(Receive(BeNil()), "Stop must not wait for an upgraded connection to end")
			Eventually(closed).WithTimeout(5*time.Second).Should(Receive(HaveOccurred()), "Stop closes the upgraded connection")
			Expect(conn.Close()).To(Succeed())
			Eventually(func() error { return goleak.Find(before) }).WithTimeout(10 * time.Second).Should(Succeed())
		},
		Entry("WebSocket", "websocket"),
		Entry("SPDY/3.1", "SPDY/3.1"),
	)
})

var _ = Describe("a dry-run write", func() {
	DescribeTable("is traced as a dry run, and an ordinary write is not",
		func(contentType string) {
			ctx := context.Background()
			ns := newNamespace()
			clientName := "dry-run-" + contentType
			c, err := px.Client(clientName)
			Expect(err).NotTo(HaveOccurred())
			cfg := c.Config()
			cfg.ContentType = contentType // of request bodies: the DeleteOptions of a delete carry its dryRun
			cms := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns)
			start := px.Trace().Cursor()
			dry := []string{metav1.DryRunAll}
			cm := configMaps.newObject(ns, "a", "0").(*corev1.ConfigMap)
			patch := []byte(`{"data":{"value":"1"}}`)

			_, err = cms.Create(ctx, cm, metav1.CreateOptions{DryRun: dry})
			Expect(err).NotTo(HaveOccurred())
			Expect(direct.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(MatchError(ContainSubstring("not found")), "a dry run persists nothing")
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = cms.Patch(ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{DryRun: dry})
			Expect(err).NotTo(HaveOccurred())
			_, err = cms.Patch(ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(cms.Delete(ctx, "a", metav1.DeleteOptions{DryRun: dry})).To(Succeed())
			Expect(cms.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: dry}, metav1.ListOptions{})).To(Succeed())
			Expect(direct.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed(), "dry-run deletes delete nothing")
			Expect(cms.Delete(ctx, "a", metav1.DeleteOptions{})).To(Succeed())

			var traced []string
			for _, r := range requestsOfClient(px, start, clientName) {
				traced = append(traced, fmt.Sprintf("%s %d dryRun=%t", r.Verb, r.Code, r.DryRun))
			}
			Expect(traced).To(Equal([]string{
				"create 201 dryRun=true",
				"create 201 dryRun=false",
				"patch 200 dryRun=true",
				"patch 200 dryRun=false",
				"delete 200 dryRun=true",
				"deletecollection 200 dryRun=true",
				"delete 200 dryRun=false",
			}))
		},
		Entry("JSON", "application/json"),
		Entry("protobuf", protobuf),
	)
})

var _ = Describe("a Cut rule", func() {
	It("passes a dry-run write, which changes nothing, and cuts the first real one", func() {
		ctx := context.Background()
		ns := newNamespace()
		Expect(direct.Create(ctx, configMaps.newObject(ns, "a", "0"))).To(Succeed())
		const clientName = "dry-run-cut"
		c, err := px.Client(clientName)
		Expect(err).NotTo(HaveOccurred())
		cms := kubernetes.NewForConfigOrDie(c.Config()).CoreV1().ConfigMaps(ns)
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: clientName, Resource: "configmaps", Action: proxy.Cut})).To(Succeed())
		DeferCleanup(func() {
			clearRules()
			px.Thaw(clientName)
		})
		start := px.Trace().Cursor()
		patch := func(v string, opts metav1.PatchOptions) error {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := cms.Patch(pctx, "a", types.MergePatchType, []byte(`{"data":{"value":"`+v+`"}}`), opts)
			return err
		}
		Expect(patch("dry", metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})).To(Succeed(), "a dry run is answered")
		Expect(patch("real", metav1.PatchOptions{})).To(MatchError(ContainSubstring("context deadline exceeded")), "the first real write is cut")
		Expect(serverValues(ns, configMaps)).To(HaveKeyWithValue("a", "real"), "and applied")

		var traced []string
		for _, r := range requestsOfClient(px, start, clientName) {
			traced = append(traced, fmt.Sprintf("%s dryRun=%t cut=%t", r.Verb, r.DryRun, r.FaultKind == trace.FaultCut))
		}
		Expect(traced).To(Equal([]string{"patch dryRun=true cut=false", "patch dryRun=false cut=true"}))
	})
})
