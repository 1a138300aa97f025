package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var _ = Describe("a client's listener", func() {
	It("admits only its own client: the client's token, addressed to its loopback address; the token never goes upstream", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		DeferCleanup(cancel)
		mine, err := px.Client("listener-mine")
		Expect(err).NotTo(HaveOccurred())
		other, err := px.Client("listener-other")
		Expect(err).NotTo(HaveOccurred())
		plain := listenerTransport(mine)
		start := px.Trace().Cursor()

		// A secret through the listener, as a local process or a web page
		// would ask for it.
		get := func(host, token string) (int, string) {
			GinkgoHelper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, mine.URL+"/api/v1/namespaces/default/secrets", nil)
			Expect(err).NotTo(HaveOccurred())
			if host != "" {
				req.Host = host
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := plain.RoundTrip(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			return resp.StatusCode, string(body)
		}
		code, body := get("", "")
		Expect(code).To(Equal(http.StatusUnauthorized), "no token: %s", body)
		var status metav1.Status
		Expect(json.Unmarshal([]byte(body), &status)).To(Succeed(), "a refusal is a Status, as the apiserver's: %s", body)
		Expect(status.Reason).To(Equal(metav1.StatusReasonUnauthorized))
		Expect(status.Message).To(ContainSubstring(`client "listener-mine"`))
		code, body = get("", other.Config().BearerToken)
		Expect(code).To(Equal(http.StatusUnauthorized), "another client's token: %s", body)
		code, body = get("", "not-"+mine.Config().BearerToken)
		Expect(code).To(Equal(http.StatusUnauthorized), "a wrong token: %s", body)
		code, body = get("attacker.example", mine.Config().BearerToken)
		Expect(code).To(Equal(http.StatusForbidden), "a foreign Host (DNS rebinding), even with the token: %s", body)
		Expect(body).To(ContainSubstring(`host "attacker.example" not allowed`))
		Expect(requestsOfClient(px, start, "listener-mine")).To(BeEmpty(), "a refused request is never forwarded, so never traced")

		code, body = get("", mine.Config().BearerToken)
		Expect(code).To(Equal(http.StatusOK), "its own token: %s", body)
		code, body = get("localhost"+mine.URL[len("https://127.0.0.1"):], mine.Config().BearerToken)
		Expect(code).To(Equal(http.StatusOK), "addressed as localhost: %s", body)

		By("a kubeconfig written for the client works, and the apiserver sees the upstream's identity, never the client's token")
		path := filepath.Join(GinkgoT().TempDir(), "mine.kubeconfig")
		Expect(mine.WriteKubeconfig(path)).To(Succeed())
		info, err := os.Stat(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.BearerToken).To(Equal(mine.Config().BearerToken))
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		// Had the token gone upstream, the apiserver would refuse it (401).
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		directCS, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		want, err := directCS.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.UserInfo.Username).To(Equal(want.Status.UserInfo.Username), "through the proxy, the upstream's identity")
	})
})
