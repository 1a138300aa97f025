package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/yaml"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// maxCapture bounds how much of a request or response body the proxy holds to
// read its resourceVersion. Larger bodies are forwarded whole as they stream,
// and their resourceVersion is not recorded.
const maxCapture = 4 << 20

type exchangeKey struct{}

// exchange is one request's state, shared by ServeHTTP and the ReverseProxy
// hooks through the request context.
type exchange struct {
	info *request.RequestInfo
	rec  trace.Request
	done bool // recorded already, before the client could see the response
}

// ServeHTTP forwards one request of this client upstream and records it.
func (c *Client) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := c.p
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		http.Error(w, "stalefuzz proxy is stopping", http.StatusServiceUnavailable)
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(p.stopCtx, cancel)()

	info, _ := p.infos.NewRequestInfo(r) // on error info still holds what is known
	ex := &exchange{info: info, rec: trace.Request{
		Client: c.Name, Verb: info.Verb, APIGroup: info.APIGroup, Resource: info.Resource,
		Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name, Start: time.Now(),
	}}
	if !info.IsResourceRequest {
		ex.rec.Verb, ex.rec.Path = strings.ToLower(r.Method), r.URL.Path
	}
	switch info.Verb {
	case "create", "update", "patch":
		ex.rec.SentRV = c.bodyRV(r)
	default:
		ex.rec.SentRV = r.URL.Query().Get("resourceVersion")
	}

	sw := &statusWriter{ResponseWriter: w}
	c.rp.ServeHTTP(sw, r.WithContext(context.WithValue(ctx, exchangeKey{}, ex)))
	if ex.done {
		return
	}
	// No response from upstream (an upstream error, a body too large to
	// hold): recorded now.
	ex.rec.Code = sw.status()
	ex.rec.Latency = time.Since(ex.rec.Start)
	p.trace.AddRequest(ex.rec)
}

// bodyRV reads a write's body (restoring it for forwarding) and returns the
// metadata.resourceVersion it carries, the write's precondition.
func (c *Client) bodyRV(r *http.Request) string {
	if r.Body == nil || r.Body == http.NoBody {
		return ""
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, maxCapture+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rest), rest}
	if err != nil || len(head) > maxCapture {
		return ""
	}
	return bodyResourceVersion(head, r.Header.Get("Content-Type"))
}

func (c *Client) modifyResponse(resp *http.Response) error {
	ex, _ := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return nil
	}
	if ex.info.Verb == "watch" {
		ex.rec.Code = resp.StatusCode
		ex.rec.Latency = time.Since(ex.rec.Start)
		ex.rec.ContentType = resp.Header.Get("Content-Type")
		ex.done = true
		c.p.trace.AddRequest(ex.rec)
		if resp.StatusCode == http.StatusOK {
			if s := c.newStream(resp, ex.info); s != nil {
				resp.Body = s
			}
		}
		return nil
	}
	// Hold the whole (small) response, record it, then let it go: a client
	// never sees an answer the trace does not have yet.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCapture+1))
	if err != nil {
		return fmt.Errorf("proxy: unable to read response of %s %s for client %q: %w", resp.Request.Method, resp.Request.URL.Path, c.Name, err)
	}
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if len(body) > maxCapture {
		return nil // recorded without its resourceVersion when it is done
	}
	ex.rec.Code = resp.StatusCode
	ex.rec.Latency = time.Since(ex.rec.Start)
	if resp.Header.Get("Content-Encoding") == "" {
		ct := resp.Header.Get("Content-Type")
		ex.rec.ReturnedRV = bodyResourceVersion(body, ct)
		if len(c.p.Fields) > 0 && resp.StatusCode/100 == 2 {
			ex.rec.Fields = jsonFields(body, ct, c.p.Fields)
		}
	}
	ex.done = true
	c.p.trace.AddRequest(ex.rec)
	return nil
}

func (c *Client) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() == nil {
		c.p.Log.Info("proxy: upstream request failed", "client", c.Name, "method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	w.WriteHeader(http.StatusBadGateway)
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// jsonFields returns the JSON-encoded values at the dotted paths in a JSON
// object body; nil if none is present or the body is not JSON.
func jsonFields(body []byte, contentType string, paths []string) map[string]string {
	if !strings.Contains(contentType, "json") {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	var out map[string]string
	for _, path := range paths {
		var v any = obj
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if v == nil {
			continue
		}
		enc, err := json.Marshal(v)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[path] = string(enc)
	}
	return out
}

// bodyResourceVersion returns metadata.resourceVersion of an object or list
// body, or of a patch: a merge or strategic-merge patch's metadata, a JSON
// patch's "test" of /metadata/resourceVersion, an apply configuration's
// metadata. "" when there is none or the body cannot be read.
func bodyResourceVersion(body []byte, contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/vnd.kubernetes.protobuf":
		return protobufResourceVersion(body)
	case mt == "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return ""
		}
		body = j
	case mt == "application/json-patch+json":
		var ops []struct {
			Op, Path string
			Value    any
		}
		if json.Unmarshal(body, &ops) != nil {
			return ""
		}
		for _, op := range ops {
			if op.Op == "test" && op.Path == "/metadata/resourceVersion" {
				s, _ := op.Value.(string)
				return s
			}
		}
		return ""
	}
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	return obj.Metadata.ResourceVersion
}
