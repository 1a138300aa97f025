package redact

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// Prefix begins every replacement.
const Prefix = "redacted:"

// Resource is what a request addressed, as the apiserver's RequestInfo names
// it.
type Resource struct {
	Group       string // API group; "" for the core group
	Resource    string // plural, lower case: "secrets"
	Subresource string // "token", "status"; "" for none
}

// Value returns v, a value decoded from JSON (or converted to its
// unstructured form) found at path, a dotted path ("data.password") in an
// object of r, with every part that holds a credential replaced (see the
// package documentation). v itself is never modified.
func Value(r Resource, path string, v any) any {
	if v == nil {
		return nil
	}
	for _, s := range credentialPaths(r) {
		if p := strings.Join(s, "."); path == p || strings.HasPrefix(path, p+".") {
			return replacement(v)
		}
	}
	v = below(r, path, v)
	v, _ = shapes(v, 0)
	return v
}

// credentialPaths lists, as path segments, where r's objects hold
// credentials.
func credentialPaths(r Resource) [][]string {
	switch {
	case r.Group == "" && r.Resource == "secrets":
		return [][]string{{"data"}, {"stringData"}, {"metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"}}
	case r.Group == "" && r.Resource == "serviceaccounts" && r.Subresource == "token":
		return [][]string{{"spec"}, {"status", "token"}}
	case r.Group == "authentication.k8s.io" && r.Resource == "tokenreviews":
		return [][]string{{"spec", "token"}}
	}
	return nil
}

// below redacts the credential paths of r that lie below path in v, and in
// each object of a list's items.
func below(r Resource, path string, v any) any {
	paths := credentialPaths(r)
	if len(paths) == 0 {
		return v
	}
	if items, ok := v.([]any); ok && path == "items" {
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = below(r, "", it)
		}
		return out
	}
	for _, s := range paths {
		for i := range s {
			if strings.Join(s[:i], ".") == path {
				v = replaceAt(v, s[i:])
				break
			}
		}
	}
	return v
}

// replaceAt returns v with the value at rest (path segments below v)
// replaced, or v when it has none there.
func replaceAt(v any, rest []string) any {
	m, ok := v.(map[string]any)
	if !ok || m[rest[0]] == nil {
		return v
	}
	out := make(map[string]any, len(m))
	for k, c := range m {
		out[k] = c
	}
	if len(rest) == 1 {
		out[rest[0]] = replacement(m[rest[0]])
	} else {
		out[rest[0]] = replaceAt(m[rest[0]], rest[1:])
	}
	return out
}

// maxDepth bounds how deep shapes looks into text that holds YAML, JSON or
// base64 (a kubeconfig's YAML in a ConfigMap's JSON in an annotation is 2).
const maxDepth = 3

// maxParse bounds the text shapes parses as YAML or JSON; longer text is
// judged by its substrings only.
const maxParse = 1 << 20

// shapes returns v with every credential-shaped part replaced, and whether
// there was one.
func shapes(v any, depth int) (any, bool) {
	switch x := v.(type) {
	case string:
		if credentialText(x, depth) {
			return replacement(x), true
		}
	case map[string]any:
		if kubeconfigObject(x) {
			return replacement(x), true
		}
		var out map[string]any
		for k, c := range x {
			r, changed := shapes(c, depth)
			if !changed {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(x))
				for k, c := range x {
					out[k] = c
				}
			}
			out[k] = r
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, c := range x {
			r, changed := shapes(c, depth)
			if !changed {
				continue
			}
			if out == nil {
				out = append([]any(nil), x...)
			}
			out[i] = r
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}

var (
	privateKey = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----`)
	// jwt: a JSON Web Token; its header and payload are base64url JSON
	// objects, so both begin with eyJ ({").
	jwt        = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
	base64Text = regexp.MustCompile(`^[A-Za-z0-9+/]{16,}={0,2}$`)
)

// credentialText reports whether s holds a private key, a token or a
// kubeconfig, as text, as YAML or JSON, or base64-encoded.
func credentialText(s string, depth int) bool {
	if privateKey.MatchString(s) || jwt.MatchString(s) ||
		strings.Contains(s, "client-key-data") || strings.Contains(s, "client-certificate-data") {
		return true
	}
	if depth >= maxDepth {
		return false
	}
	if len(s) <= maxParse && strings.Contains(s, ":") && strings.ContainsAny(s, "\n{") {
		var x any
		if yaml.Unmarshal([]byte(s), &x) == nil {
			if _, found := shapes(x, depth+1); found {
				return true
			}
		}
	}
	if len(s)%4 == 0 && base64Text.MatchString(s) {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil && utf8.Valid(b) {
			return credentialText(string(b), depth+1)
		}
	}
	return false
}

// kubeconfigObject reports whether m is a kubeconfig, or the part of one that
// holds credentials: kind Config with clusters, users or contexts; a users
// list with a user entry; a user entry; client key or certificate data.
func kubeconfigObject(m map[string]any) bool {
	if _, ok := m["client-key-data"]; ok {
		return true
	}
	if _, ok := m["client-certificate-data"]; ok {
		return true
	}
	if m["kind"] == "Config" && (m["clusters"] != nil || m["users"] != nil || m["contexts"] != nil) {
		return true
	}
	if users, ok := m["users"].([]any); ok {
		for _, u := range users {
			if e, ok := u.(map[string]any); ok && userEntry(e) {
				return true
			}
		}
	}
	return userEntry(m)
}

// userEntry reports whether m is a kubeconfig's named user with credentials.
func userEntry(m map[string]any) bool {
	if _, ok := m["name"].(string); !ok {
		return false
	}
	u, ok := m["user"].(map[string]any)
	if !ok {
		return false
	}
	for _, k := range []string{"token", "tokenFile", "password", "client-key", "client-key-data", "client-certificate", "client-certificate-data", "auth-provider", "exec"} {
		if _, ok := u[k]; ok {
			return true
		}
	}
	return false
}

// key is the HMAC key of replacements: drawn once per process, never
// written anywhere (see the package documentation).
var key = newKey()

func newKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails: crypto/rand crashes the program instead
	return k
}

// replacement is what the trace records in place of v.
func replacement(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b = fmt.Appendf(nil, "%#v", v)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return Prefix + hex.EncodeToString(mac.Sum(nil))[:12]
}
