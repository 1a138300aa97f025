package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
