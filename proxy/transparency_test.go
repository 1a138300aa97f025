package proxy_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

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
// decompression).
func plainHTTP() *http.Client {
	t := &http.Transport{DisableCompression: true}
	DeferCleanup(t.CloseIdleConnections)
	return &http.Client{Transport: t}
}

var _ = Describe("a watch that asks for Table output (kubectl get -w)", func() {
	It("is traced with each event's namespace and name, and a Name rule holds only that object's events", func() {
		ctx := context.Background()
		ns := newNamespace()
		const clientName = "table-watch"
		c, err := px.Client(clientName)
		Expect(err).NotTo(HaveOccurred())
		hc := plainHTTP()

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
		hc := plainHTTP()

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
		cfg := c.Config()
		cfg.Transport = &http2Off{}
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
		hc := plainHTTP()
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
