package proxy

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/endpoints/request"
)

// holdsWhole reports whether the proxy holds a response whole (up to
// maxCapture) and records it before forwarding it: a finite API object, the
// answer to a get, list, create, update, patch or delete of a resource (or of
// a subresource that is an object, such as status or scale) in a media type
// the apiserver encodes objects in. Everything else flows to the client as it
// arrives: a log (follow=true never ends), pod, service and node proxy
// traffic, exec, attach and port-forward, non-resource paths, and a 101
// Switching Protocols, whose body is the upgraded connection itself.
func holdsWhole(info *request.RequestInfo, resp *http.Response) bool {
	if resp.StatusCode == http.StatusSwitchingProtocols || !info.IsResourceRequest {
		return false
	}
	switch info.Verb {
	case "get", "list", "create", "update", "patch", "delete", "deletecollection":
	default:
		return false
	}
	switch info.Subresource {
	case "log", "proxy", "exec", "attach", "portforward":
		return false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor":
		return true
	}
	return false
}

// readObject records in ex what the trace keeps of a held response body: its
// resourceVersion and, for a success, Proxy.Fields. A gzip-encoded body (the
// apiserver compresses responses over 128 KiB for clients that accept gzip,
// as Go clients do by default) is read from a decompressed copy of at most
// maxCapture bytes; the client gets the original bytes either way.
func (c *Client) readObject(ex *exchange, resp *http.Response, body []byte) {
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))) {
	case "", "identity":
	case "gzip":
		plain, ok := gunzip(body, maxCapture)
		if !ok {
			return
		}
		body = plain
	default:
		return // no apiserver sends another encoding
	}
	ct := resp.Header.Get("Content-Type")
	ex.rec.ReturnedRV = bodyResourceVersion(body, ct)
	if ex.info.Verb == "create" && ex.rec.Name == "" && resp.StatusCode/100 == 2 {
		ex.rec.Name = bodyName(body, ct) // a generateName create: the name the apiserver gave
	}
	if len(c.p.Fields) > 0 && resp.StatusCode/100 == 2 {
		ex.rec.Fields = jsonFields(body, ct, resourceOf(ex.info), c.p.Fields)
	}
}

// gunzip decompresses b; false if it is not valid gzip or decompresses to more
// than limit bytes.
func gunzip(b []byte, limit int) ([]byte, bool) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	plain, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil || len(plain) > limit {
		return nil, false
	}
	return plain, true
}
