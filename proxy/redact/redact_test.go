package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stalefuzz/stalefuzz/proxy/redact"
)

const planted = "hunter2-8f3a1c"

var (
	secrets         = redact.Resource{Resource: "secrets"}
	configMaps      = redact.Resource{Resource: "configmaps"}
	tokenRequest    = redact.Resource{Resource: "serviceaccounts", Subresource: "token"}
	serviceAccounts = redact.Resource{Resource: "serviceaccounts"}
	tokenReviews    = redact.Resource{Group: "authentication.k8s.io", Resource: "tokenreviews"}
	widgets         = redact.Resource{Group: "test.stalefuzz.dev", Resource: "widgets"}
)

var replaced = regexp.MustCompile(`^redacted:[0-9a-f]{12}$`)

// decode is s as a JSON value, as the proxy decodes a body.
func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test value %s: %v", s, err)
	}
	return v
}

func encode(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var pemKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + planted + "\n-----END RSA PRIVATE KEY-----\n"

var kubeconfigKey = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user:
    client-certificate-data: Y2VydA==
    client-key-data: ` + planted + `
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`

// kubeconfigToken has none of the kubeconfig key names and no kind: only
// its structure says what it is.
var kubeconfigToken = "users:\n- name: u\n  user:\n    token: " + planted + "\n"

var jwtToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGVmYXVsdDpkZWZhdWx0In0." + strings.ReplaceAll(planted, "2", "x")

func TestValueRedactsByResourceAndPath(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(planted))
	for _, c := range []struct {
		name string
		r    redact.Resource
		path string
		v    string // JSON
	}{
		{"secret data key", secrets, "data.password", `"` + b64 + `"`},
		{"secret stringData key", secrets, "stringData.password", `"` + planted + `"`},
		{"secret key with dots", secrets, "data.tls.key", `"` + b64 + `"`},
		{"secret data whole (JSON patch /data)", secrets, "data", `{"password":"` + b64 + `"}`},
		{"secret stringData whole", secrets, "stringData", `{"password":"` + planted + `"}`},
		{"secret object root", secrets, "", `{"metadata":{"name":"s"},"data":{"password":"` + b64 + `"},"stringData":{"p":"` + planted + `"}}`},
		{"secret list items", secrets, "items", `[{"metadata":{"name":"s"},"data":{"password":"` + b64 + `"}}]`},
		{"secret last-applied annotation", secrets, "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration", `"{\"stringData\":{\"password\":\"` + planted + `\"}}"`},
		{"secret annotations whole", secrets, "metadata.annotations", `{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"p\":\"` + b64 + `\"}}"}`},
		{"token request spec", tokenRequest, "spec.audiences", `["` + planted + `"]`},
		{"token request status.token", tokenRequest, "status.token", `"` + planted + `"`},
		{"token request status whole", tokenRequest, "status", `{"token":"` + planted + `","expirationTimestamp":"2030-01-01T00:00:00Z"}`},
		{"token review spec.token", tokenReviews, "spec.token", `"` + planted + `"`},
		{"token review spec", tokenReviews, "spec", `{"token":"` + planted + `","audiences":["a"]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := decode(t, c.v)
			got := encode(redact.Value(c.r, c.path, in))
			if strings.Contains(got, planted) || strings.Contains(got, b64) {
				t.Errorf("%v %s = %s: got %s, want the value redacted", c.r, c.path, c.v, got)
			}
			if !strings.Contains(got, redact.Prefix) {
				t.Errorf("%v %s = %s: got %s, want a replacement", c.r, c.path, c.v, got)
			}
			if encode(in) != encode(decode(t, c.v)) {
				t.Errorf("%v %s: Value modified its argument: %s", c.r, c.path, encode(in))
			}
		})
	}
}

func TestValueRedactsCredentialShapesAnywhere(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	str := func(s string) string { return encode(s) }
	cmJSON := encode(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"kubeconfig": kubeconfigToken}})
	for _, c := range []struct {
		name string
		r    redact.Resource
		path string
		v    string // JSON
	}{
		{"PEM private key in a ConfigMap", configMaps, "data.tls.key", str(pemKey)},
		{"PKCS#8 private key", widgets, "spec.key", str("-----BEGIN PRIVATE KEY-----\n" + planted + "\n-----END PRIVATE KEY-----")},
		{"OpenSSH private key", widgets, "spec.key", str("-----BEGIN OPENSSH PRIVATE KEY-----\n" + planted)},
		{"kubeconfig with client key data", configMaps, "data.kubeconfig", str(kubeconfigKey)},
		{"kubeconfig with a token user only", configMaps, "data.kubeconfig", str(kubeconfigToken)},
		{"kubeconfig as JSON text", configMaps, "data.kubeconfig", str(`{"kind":"Config","users":[{"name":"u","user":{"token":"` + planted + `"}}]}`)},
		{"kubeconfig base64 in binaryData", configMaps, "binaryData.kubeconfig", str(b64(kubeconfigToken))},
		{"PEM key base64", widgets, "spec.keyData", str(b64(pemKey))},
		{"kubeconfig as an object (JSON patch value)", widgets, "spec.kubeconfig", `{"kind":"Config","clusters":[],"users":[{"name":"u","user":{"token":"` + planted + `"}}]}`},
		{"kubeconfig users list (a flattened leaf)", widgets, "spec.kubeconfig.users", `[{"name":"u","user":{"password":"` + planted + `"}}]`},
		{"JSON Web Token", configMaps, "data.token", str(jwtToken)},
		{"bearer header holding a JWT", widgets, "spec.header", str("Authorization: Bearer " + jwtToken)},
		{"PEM key in a pod's env (a list leaf)", redact.Resource{Resource: "pods"}, "spec.containers", `[{"name":"c","env":[{"name":"KEY","value":` + str(pemKey) + `}]}]`},
		{"ConfigMap's last-applied annotation holding a kubeconfig", configMaps, "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration", str(cmJSON)},
		{"service account token secret's data via items", secrets, "items", `[{"data":{"token":"` + b64(planted) + `"}}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := encode(redact.Value(c.r, c.path, decode(t, c.v)))
			if got == encode(decode(t, c.v)) || strings.Contains(got, planted) || strings.Contains(got, b64(planted)) || strings.Contains(got, "eyJzdWIi") {
				t.Errorf("%v %s = %s: got %s, want the credential redacted", c.r, c.path, c.v, got)
			}
		})
	}
}

func TestValueKeepsWhatHoldsNoCredential(t *testing.T) {
	for _, c := range []struct {
		name string
		r    redact.Resource
		path string
		v    string // JSON
	}{
		{"ConfigMap data", configMaps, "data.password", `"hunter2"`},
		{"secret's type", secrets, "type", `"Opaque"`},
		{"secret's labels", secrets, "metadata.labels.app", `"x"`},
		{"secret's annotations without last-applied", secrets, "metadata.annotations", `{"a":"b"}`},
		{"removal of secret data", secrets, "data.password", `null`},
		{"service account's secrets (no token subresource)", serviceAccounts, "secrets", `[{"name":"s"}]`},
		{"token review status", tokenReviews, "status.user.username", `"system:serviceaccount:default:default"`},
		{"public certificate", configMaps, "data.ca.crt", encode("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")},
		{"YAML without a kubeconfig", configMaps, "data.config", encode("users:\n- name: alice\n  role: admin\ntoken: plain-word\n")},
		{"kubeconfig clusters only", widgets, "spec.clusters", `[{"name":"c","cluster":{"server":"https://x"}}]`},
		{"status plan", widgets, "status.plan.id", `"3ac871b52561"`},
		{"conditions", widgets, "status.conditions", `[{"type":"Ready","status":"True","message":"token: none"}]`},
		{"base64 of plain text", configMaps, "binaryData.a", encode(base64.StdEncoding.EncodeToString([]byte("plain text here, no secrets")))},
		{"a number", widgets, "spec.replicas", `3`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := encode(redact.Value(c.r, c.path, decode(t, c.v)))
			if got != encode(decode(t, c.v)) {
				t.Errorf("%v %s = %s: got %s, want it unchanged", c.r, c.path, c.v, got)
			}
		})
	}
}

func TestReplacementsCompareAsTheValues(t *testing.T) {
	a := redact.Value(secrets, "data.password", "aHVudGVyMg==")
	if s, ok := a.(string); !ok || !replaced.MatchString(s) {
		t.Fatalf("secret data.password: got %#v, want a string matching %s", a, replaced)
	}
	if b := redact.Value(secrets, "data.password", "aHVudGVyMg=="); b != a {
		t.Errorf("the same value twice: got %v and %v, want equal replacements", a, b)
	}
	if b := redact.Value(secrets, "data.other", "aHVudGVyMg=="); b != a {
		t.Errorf("the same value at another key: got %v and %v, want equal replacements", a, b)
	}
	if b := redact.Value(secrets, "data.password", "aHVudGVyMw=="); b == a {
		t.Errorf("two values: got %v for both, want different replacements", a)
	}
	// A protobuf body converted to unstructured has int64 where JSON has
	// float64: the same value either way.
	if x, y := redact.Value(tokenRequest, "spec.expirationSeconds", int64(3600)), redact.Value(tokenRequest, "spec.expirationSeconds", float64(3600)); x != y {
		t.Errorf("3600 as int64 and as float64: got %v and %v, want equal replacements", x, y)
	}
	// Objects compare by content, whatever the order their keys came in.
	x := redact.Value(secrets, "data", decode(t, `{"a":"YQ==","b":"Yg=="}`))
	y := redact.Value(secrets, "data", decode(t, `{"b":"Yg==","a":"YQ=="}`))
	if x != y {
		t.Errorf("one object, keys in two orders: got %v and %v, want equal replacements", x, y)
	}
	if z := redact.Value(secrets, "data", decode(t, `{"a":"YQ==","b":"Yw=="}`)); z == x {
		t.Errorf("two objects: got %v for both, want different replacements", x)
	}
}

func ExampleValue() {
	secret := redact.Resource{Resource: "secrets"}
	a := redact.Value(secret, "stringData.password", "hunter2")
	b := redact.Value(secret, "stringData.password", "hunter2")
	fmt.Println(strings.HasPrefix(a.(string), redact.Prefix), a == b)
	fmt.Println(redact.Value(redact.Resource{Resource: "configmaps"}, "data.password", "hunter2"))
	// Output:
	// true true
	// hunter2
}
