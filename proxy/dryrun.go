package proxy

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// isDryRun reports whether r asks the apiserver for a dry run (dryRun=All, the
// only value it accepts), in which nothing it would write is persisted: in
// the query, as for every write, or for a delete in the DeleteOptions body,
// where client-go and kubectl put it.
func isDryRun(r *http.Request, verb string) bool {
	if slices.ContainsFunc(r.URL.Query()["dryRun"], func(v string) bool { return v != "" }) {
		return true
	}
	if verb != "delete" && verb != "deletecollection" {
		return false
	}
	var opts metav1.DeleteOptions
	body := peekBody(r)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/vnd.kubernetes.protobuf" {
		var u runtime.Unknown
		raw, ok := bytes.CutPrefix(body, []byte("k8s\x00"))
		if !ok || u.Unmarshal(raw) != nil || opts.Unmarshal(u.Raw) != nil {
			return false
		}
	} else if yaml.Unmarshal(body, &opts) != nil { // JSON or YAML
		return false
	}
	return slices.ContainsFunc(opts.DryRun, func(v string) bool { return v != "" })
}

// peekBody returns r's body (up to maxCapture bytes; nil if longer or
// unreadable) and restores it for forwarding.
func peekBody(r *http.Request) []byte {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, maxCapture+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rest), rest}
	if err != nil || len(head) > maxCapture {
		return nil
	}
	return head
}
