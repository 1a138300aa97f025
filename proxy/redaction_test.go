package proxy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/redact"
	"github.com/stalefuzz/stalefuzz/proxy/report"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// plantedSecret returns a value no trace holds by chance, letters and digits
// only, whose base64 has no padding, + or / (so that no encoding of the
// trace, JSON or HTML, changes how either reads).
func plantedSecret() string {
	for {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		s := "planted" + hex.EncodeToString(b) + "xy" // 33 bytes: base64 without padding
		if e := base64.StdEncoding.EncodeToString([]byte(s)); !strings.ContainsAny(e, "+/=") {
			return s
		}
	}
}

// leaks names where in out (a trace, audit or picture) any 12 consecutive
// characters of a secret value appear, so that a value cut short still
// counts.
func leaks(out string, values ...string) []string {
	var found []string
	for _, v := range values {
		for i := 0; i+12 <= len(v); i++ {
			if j := strings.Index(out, v[i:i+12]); j >= 0 {
				found = append(found, fmt.Sprintf("%q (from %q) at byte %d: …%s…", v[i:i+12], v, j, out[max(0, j-80):min(len(out), j+80)]))
				break
			}
		}
	}
	return found
}

var _ = Describe("redaction", func() {
	It("records no secret value, planted through every write verb and body form, in the trace, the audit or the picture", func() {
		ctx := context.Background()
		ns := newNamespace()
		p := &proxy.Proxy{Upstream: cp.Config, Fields: []string{"data", "data.password", "stringData", "spec", "status", "status.token", "data.kubeconfig"}}
		Expect(p.Start()).To(Succeed())
		DeferCleanup(p.Stop)
		c, err := p.Client("writer")
		Expect(err).NotTo(HaveOccurred())
		proto := kubernetes.NewForConfigOrDie(c.Config()) // protobuf bodies
		jcfg := c.Config()
		jcfg.ContentType, jcfg.AcceptContentTypes = "application/json", "application/json"
		js := kubernetes.NewForConfigOrDie(jcfg) // JSON bodies, so that Proxy.Fields are read
		cr, err := client.New(c.Config(), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		pw := plantedSecret()
		pwB64 := base64.StdEncoding.EncodeToString([]byte(pw))
		planted := []string{pw, pwB64}
		plant := func() string { // a value of its own per write besides pw, so that each write's own value is checked too
			s := plantedSecret()
			planted = append(planted, s, base64.StdEncoding.EncodeToString([]byte(s)))
			return s
		}

		// create: JSON (controller-runtime) and protobuf (client-go).
		Expect(cr.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "json", Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Secret","stringData":{"password":"` + plant() + `"}}`,
			}},
			Data:       map[string][]byte{"password": []byte(pw)},
			StringData: map[string]string{"token": plant()},
		})).To(Succeed())
		secrets := proto.CoreV1().Secrets(ns)
		s, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "proto"}, Data: map[string][]byte{"password": []byte(pw)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// update: protobuf, then JSON.
		s.Data["password"] = []byte(plant())
		s, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		s.Data["password"] = []byte(plant())
		_, err = js.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// merge patch, strategic-merge patch, JSON patch (a key, a
		// stringData key, the whole of data).
		_, err = secrets.Patch(ctx, "proto", types.MergePatchType, []byte(`{"stringData":{"password":"`+plant()+`"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = secrets.Patch(ctx, "proto", types.StrategicMergePatchType, []byte(`{"data":{"password":"`+base64.StdEncoding.EncodeToString([]byte(plant()))+`"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = secrets.Patch(ctx, "proto", types.JSONPatchType, []byte(`[`+
			`{"op":"add","path":"/data/other","value":"`+base64.StdEncoding.EncodeToString([]byte(plant()))+`"},`+
			`{"op":"add","path":"/stringData","value":{"p":"`+plant()+`"}},`+
			`{"op":"replace","path":"/data","value":{"password":"`+pwB64+`"}}]`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		// server-side apply: JSON (client-go's apply configurations) and
		// YAML.
		_, err = secrets.Apply(ctx, applycorev1.Secret("applied", ns).WithStringData(map[string]string{"password": plant()}), metav1.ApplyOptions{FieldManager: "json-apply", Force: true})
		Expect(err).NotTo(HaveOccurred())
		_, err = secrets.Patch(ctx, "applied", types.ApplyYAMLPatchType, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: applied\ndata:\n  password: "+pwB64+"\n"), metav1.PatchOptions{FieldManager: "yaml-apply", Force: ptr.To(true)})
		Expect(err).NotTo(HaveOccurred())
		// A read through JSON, for Proxy.Fields.
		_, err = js.CoreV1().Secrets(ns).Get(ctx, "applied", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		// Credentials by shape, in a ConfigMap: a kubeconfig and a PEM key.
		kubeconfig := "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: " + plant() + "\n"
		pemKey := "-----BEGIN EC PRIVATE KEY-----\n" + plant() + "\n-----END EC PRIVATE KEY-----\n"
		_, err = proto.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig"}, Data: map[string]string{"kubeconfig": kubeconfig, "key.pem": pemKey}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = js.CoreV1().ConfigMaps(ns).Get(ctx, "kubeconfig", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		// A TokenRequest (its answer's token is a credential the apiserver
		// made) and a TokenReview, both through JSON for Proxy.Fields.
		_, err = proto.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := js.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sa", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{plant()}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(tr.Status.Token).NotTo(BeEmpty())
		planted = append(planted, tr.Status.Token)
		_, err = js.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: plant()}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		got := p.Trace().Since(trace.Cursor{})
		var jsonl, table bytes.Buffer
		Expect(got.WriteJSONL(&jsonl)).To(Succeed())
		rep := audit.Of(got)
		Expect(rep.WriteTable(&table)).To(Succeed())
		var picture bytes.Buffer
		Expect(report.Write(&picture, report.Page{Trace: got, Sections: []report.Section{{Title: "audit", HTML: rep.HTML()}}})).To(Succeed())
		leaked := map[string][]string{}
		for name, out := range map[string]string{
			"trace JSONL":    jsonl.String(),
			"audit table":    table.String(),
			"audit HTML":     html.UnescapeString(string(rep.HTML())),
			"picture (HTML)": html.UnescapeString(picture.String()),
		} {
			if l := leaks(out, planted...); len(l) > 0 {
				leaked[name] = l
			}
		}
		Expect(leaked).To(BeEmpty(), "planted secrets, by where they were found")

		// What was recorded in their place: each write's value, redacted,
		// and equal values equal.
		redacted := map[string][]string{} // "verb patch name" → paths set to a replacement
		var fields []string
		for _, r := range got.Requests {
			for k, v := range r.Fields {
				if strings.HasPrefix(v, `"`+redact.Prefix) || strings.Contains(v, `":"`+redact.Prefix) {
					fields = append(fields, r.Resource+"/"+r.Subresource+" "+k)
				}
			}
			if r.Write == nil {
				continue
			}
			for k, v := range r.Write.Set {
				if strings.Contains(v, `"`+redact.Prefix) {
					key := strings.Join(strings.Fields(r.Verb+" "+r.Write.Patch+" "+r.Resource+" "+r.Name), " ")
					if !slices.Contains(redacted[key], k) {
						redacted[key] = append(redacted[key], k)
					}
				}
			}
		}
		// (A create is traced with the name of the object it created.)
		Expect(redacted).To(HaveKeyWithValue("create secrets json", ConsistOf("data.password", "stringData.token", "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration")))
		Expect(redacted).To(HaveKeyWithValue("create secrets proto", ConsistOf("data.password")))
		Expect(redacted).To(HaveKeyWithValue("update secrets proto", ConsistOf("data.password")))
		Expect(redacted).To(HaveKeyWithValue("patch merge secrets proto", ConsistOf("stringData.password")))
		Expect(redacted).To(HaveKeyWithValue("patch strategic-merge secrets proto", ConsistOf("data.password")))
		Expect(redacted).To(HaveKeyWithValue("patch json secrets proto", ConsistOf("data.other", "stringData", "data")))
		Expect(redacted).To(HaveKeyWithValue("patch apply secrets applied", ConsistOf("stringData.password", "data.password")))
		Expect(redacted).To(HaveKeyWithValue("create configmaps kubeconfig", ConsistOf("data.kubeconfig", "data.key.pem")))
		Expect(redacted).To(HaveKeyWithValue("create serviceaccounts sa", ConsistOf("spec.audiences", "status.token")))
		Expect(redacted).To(HaveKeyWithValue("create tokenreviews", ConsistOf("spec.token")))
		Expect(fields).To(ContainElements("secrets/ data", "configmaps/ data.kubeconfig", "serviceaccounts/token status", "serviceaccounts/token status.token", "tokenreviews/ spec"))

		var sets []map[string]string // each write to a secret, in order
		for _, r := range got.Requests {
			if r.Write != nil && r.Resource == "secrets" {
				sets = append(sets, r.Write.Set)
			}
		}
		Expect(sets).To(HaveLen(9))
		jsonCreate, protoCreate, protoUpdate, yamlApply := sets[0], sets[1], sets[2], sets[8]
		Expect(protoCreate["data.password"]).To(HavePrefix(`"` + redact.Prefix))
		Expect(jsonCreate["data.password"]).To(Equal(protoCreate["data.password"]), "one value created through JSON and through protobuf")
		Expect(yamlApply["data.password"]).To(Equal(protoCreate["data.password"]), "one value created and applied")
		Expect(protoUpdate["data.password"]).NotTo(Equal(protoCreate["data.password"]), "two values")
	})
})
