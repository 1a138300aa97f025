package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// answersClient is a client-go clientset of a fresh proxy client, speaking
// protobuf as built-in controllers do.
func answersClient(name string) kubernetes.Interface {
	GinkgoHelper()
	c, err := px.Client(name)
	Expect(err).NotTo(HaveOccurred())
	cfg := c.Config()
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	return kubernetes.NewForConfigOrDie(cfg)
}

// faultsOf is the client's requests the proxy did something to.
func faultsOf(name string) []trace.Request {
	var out []trace.Request
	for _, r := range requestsOf(name) {
		if r.FaultKind != "" {
			out = append(out, r)
		}
	}
	return out
}

// expectOneFault: the client's one faulted request is of kind, and the
// trace's code is code (the apiserver's answer, or the proxy's own).
func expectOneFault(name string, kind trace.FaultKind, code int) {
	GinkgoHelper()
	fs := faultsOf(name)
	Expect(fs).To(HaveLen(1))
	Expect(fs[0].FaultKind).To(Equal(kind))
	Expect(fs[0].Code).To(Equal(code))
}

func createCM(cs kubernetes.Interface, ns, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": "0"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

func exists(ns, name string) bool {
	GinkgoHelper()
	err := direct.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

var _ = Describe("Faults on answers", func() {
	It("Lose: the apiserver applies the create, the client is told 504 Timeout and keeps running", func() {
		ns, name := newNamespace(), "loser"
		cs := answersClient(name)
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: "configmaps", Verbs: []string{"create"}, After: 1, Action: proxy.Lose})).To(Succeed())
		DeferCleanup(clearRules)

		Expect(createCM(cs, ns, "a")).To(Succeed(), "the first create passes (After: 1)")
		err := createCM(cs, ns, "b")
		Expect(apierrors.IsTimeout(err)).To(BeTrue(), "the second create is answered as the apiserver's timeout filter answers: %v", err)
		Expect(err).To(MatchError(ContainSubstring("request did not complete within the allotted timeout")))
		Expect(exists(ns, "b")).To(BeTrue(), "yet the apiserver applied it")
		Expect(createCM(cs, ns, "c")).To(Succeed(), "the client is not frozen, and the rule fired once")

		fs := faultsOf(name)
		Expect(fs).To(HaveLen(1))
		Expect(fs[0].FaultKind).To(Equal(trace.FaultLose))
		Expect(fs[0].Code).To(Equal(http.StatusCreated), "the trace has the answer the apiserver gave")
		Expect(fs[0].Name).To(Equal("b"))
		Expect(fs[0].Unanswered()).To(BeTrue())
	})

	It("Reset: the apiserver applies the create, the client's stream is reset and it keeps running", func() {
		ns, name := newNamespace(), "resetter"
		cs := answersClient(name)
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: "configmaps", Verbs: []string{"create"}, Action: proxy.Reset})).To(Succeed())
		DeferCleanup(clearRules)

		err := createCM(cs, ns, "a")
		Expect(err).To(HaveOccurred())
		_, answered := err.(apierrors.APIStatus)
		Expect(answered).To(BeFalse(), "a transport error, not an answer: %v", err)
		Expect(exists(ns, "a")).To(BeTrue(), "yet the apiserver applied it")
		Expect(createCM(cs, ns, "b")).To(Succeed(), "the client keeps running")
		expectOneFault(name, trace.FaultReset, http.StatusCreated)
	})

	It("Slow: the write's own watch event reaches the client's informer before its answer does", func() {
		ns, name := newNamespace(), "slowpoke"
		Expect(direct.Create(context.Background(), configMaps.newObject(ns, "a", "0"))).To(Succeed())
		inf := startInformer(name, ns, configMaps)
		cs := answersClient(name)
		const hold = 1500 * time.Millisecond
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: "configmaps", Verbs: []string{"patch"}, Action: proxy.Slow, Delay: hold})).To(Succeed())
		DeferCleanup(clearRules)

		seenFirst := make(chan bool, 1)
		go func() {
			defer GinkgoRecover()
			for range 100 {
				if inf.values()["a"] == "1" {
					seenFirst <- true
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			seenFirst <- false
		}()
		start := time.Now()
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), "a", types.MergePatchType, []byte(`{"data":{"value":"1"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(time.Since(start)).To(BeNumerically(">=", hold), "the answer came only after the hold")
		Expect(<-seenFirst).To(BeTrue(), "the informer had the write's event within a second, before the answer")

		fs := faultsOf(name)
		Expect(fs).To(HaveLen(1))
		Expect(fs[0].FaultKind).To(Equal(trace.FaultSlow))
		Expect(fs[0].Held).To(BeNumerically(">=", hold))
		Expect(fs[0].Answered()).To(BeTemporally(">=", fs[0].Start.Add(hold)))
		Expect(fs[0].Unanswered()).To(BeFalse())
		var released time.Time
		for _, e := range eventsOf(name) {
			if e.Type == "MODIFIED" && e.Name == "a" {
				released = e.Released
			}
		}
		Expect(released).To(BeTemporally("<", fs[0].Answered()), "the trace shows the event before the answer")
	})

	It("Reject 429: refused as API Priority and Fairness refuses, never applied; client-go retries it after Retry-After", func() {
		ns, name := newNamespace(), "throttled"
		cs := answersClient(name)
		Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: "configmaps", Verbs: []string{"create"}, Action: proxy.Reject})).To(Succeed())
		DeferCleanup(clearRules)

		start := time.Now()
		Expect(createCM(cs, ns, "a")).To(Succeed(), "client-go retried the 429 by itself")
		Expect(time.Since(start)).To(BeNumerically(">=", 900*time.Millisecond), "after the Retry-After second")
		var creates []trace.Request
		for _, r := range requestsOf(name) {
			if r.Verb == "create" {
				creates = append(creates, r)
			}
		}
		Expect(creates).To(HaveLen(2))
		Expect(creates[0].FaultKind).To(Equal(trace.FaultReject))
		Expect(creates[0].Code).To(Equal(http.StatusTooManyRequests))
		Expect(creates[1].FaultKind).To(BeEmpty())
		Expect(creates[1].Code).To(Equal(http.StatusCreated))
	})

	for _, tc := range []struct {
		code  int
		check func(error) bool
		words string
	}{
		{http.StatusInternalServerError, apierrors.IsInternalError, "etcdserver: request timed out"},
		{http.StatusServiceUnavailable, apierrors.IsServiceUnavailable, "the server is currently unable to handle the request"},
	} {
		It("Reject "+http.StatusText(tc.code)+": the client gets the apiserver's error, nothing is applied", func() {
			ns, name := newNamespace(), "rejected-"+strings.ToLower(strings.ReplaceAll(http.StatusText(tc.code), " ", "-"))
			cs := answersClient(name)
			Expect(px.SetRules(time.Now(), proxy.Rule{Client: name, Resource: "configmaps", Verbs: []string{"create"}, Action: proxy.Reject, Code: tc.code})).To(Succeed())
			DeferCleanup(clearRules)

			err := createCM(cs, ns, "a")
			Expect(tc.check(err)).To(BeTrue(), "%v", err)
			Expect(err).To(MatchError(ContainSubstring(tc.words)))
			Expect(exists(ns, "a")).To(BeFalse(), "never forwarded")
			Expect(createCM(cs, ns, "a")).To(Succeed(), "the rule fired once; the client keeps running")
			expectOneFault(name, trace.FaultReject, tc.code)
		})
	}
})
