package proxy

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/request"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/stalefuzz/stalefuzz/proxy/redact"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// maxCapture bounds how much of a request or response body the proxy holds to
// read its resourceVersion, and how far it decompresses a gzip-encoded copy.
// Larger bodies are forwarded whole as they stream, and their resourceVersion
// is not recorded.
const maxCapture = 4 << 20

type exchangeKey struct{}

// exchange is one request's state, shared by ServeHTTP and the ReverseProxy
// hooks through the request context.
type exchange struct {
	info *request.RequestInfo
	rec  trace.Request
	done bool   // recorded already, before the client could see the response
	act  Action // an action on writes, when such a rule matched (rule >= 0)
	rule int
	hold time.Duration // Slow: how long the answer is held
}

// ServeHTTP forwards one request of this client upstream and records it,
// if it carries the client's bearer token (see Client); the token is
// stripped before the request goes upstream.
func (c *Client) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.admits(r) {
		unauthorized(w, c.Name)
		return
	}
	r.Header.Del("Authorization")
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
	case "create", "update", "patch", "delete", "deletecollection":
		body := peekBody(r)
		var deleteRV string
		ex.rec.Write, deleteRV = describeWrite(r, info.Verb, resourceOf(info), body)
		ex.rec.SentRV = or(bodyResourceVersion(body, r.Header.Get("Content-Type")), deleteRV)
		ex.rec.Caller = r.Header.Get(CallerHeader)
	default:
		q := r.URL.Query()
		ex.rec.SentRV = q.Get("resourceVersion")
		ex.rec.Selected = q.Get("labelSelector") != "" || q.Get("fieldSelector") != ""
	}
	r.Header.Del(CallerHeader)

	ex.rule = -1
	ex.rec.DryRun = isDryRun(r, info.Verb)
	if p.isFrozen(c.Name) {
		// A Freeze or Cut fired for this client: nothing more of it reaches
		// the apiserver, and it gets no answer until it goes away.
		<-ctx.Done()
		ex.rec.Latency = time.Since(ex.rec.Start)
		ex.rec.FaultKind = trace.FaultFrozen
		ex.rec.Fault = "frozen: held unanswered, never forwarded (a Freeze or Cut stopped this client)"
		p.trace.AddRequest(ex.rec)
		panic(http.ErrAbortHandler) // no answer at all, not an empty one
	}
	if v := p.rules.Load().decideRequest(requestOf(c.Name, info, r), ex.rec.Start, p.clock.latestN()); v.rule >= 0 {
		ex.rule = v.rule
		ex.rec.Rule = &v.rule
		switch v.action {
		case Expire:
			rv := r.URL.Query().Get("resourceVersion")
			oldest := or(p.clock.latest(), rv)
			ct, frame := expiredWatch(r.Header.Get("Accept"), schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}, rv, oldest)
			ex.rec.FaultKind = trace.FaultExpire
			ex.rec.Fault = fmt.Sprintf("expire: answered 410 Expired (too old resource version: %s (%s)), as a kube-apiserver whose watch cache no longer holds it", rv, oldest)
			ex.rec.Code, ex.rec.ContentType = http.StatusOK, ct
			ex.rec.Latency = time.Since(ex.rec.Start)
			p.trace.AddRequest(ex.rec)
			now := time.Now()
			p.trace.AddEvent(trace.Event{
				Client: c.Name, Stream: p.nextID.Add(1), Group: info.APIGroup, Resource: info.Resource, Type: "ERROR", Kind: "Status",
				Arrived: now, Fate: trace.Released, Released: now, Rule: v.rule,
			})
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Transfer-Encoding", "chunked")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(frame)
			return
		case Rewind:
			ex.rec.FaultKind = trace.FaultRewind
			if info.Verb == "watch" {
				ex.rec.Fault = "rewind: WatchList refused as by a kube-apiserver without the WatchList feature; client-go falls back to LIST"
				ex.rec.Code = refuseWatchList(w, r, info)
				ex.rec.Latency = time.Since(ex.rec.Start)
				p.trace.AddRequest(ex.rec)
				return
			}
			if r.URL.Query().Get("resourceVersion") == "" {
				// A LIST with no resourceVersion is a consistent read (a
				// quorum read from etcd; since 1.31 the watch cache waits
				// until it has etcd's current revision): no apiserver, however
				// far its watch cache lags, serves it from the past.
				ex.rec.Fault = "rewind: a consistent LIST (no resourceVersion) cannot be served from the past; served the current state"
				break
			}
			rv, why := v.rv, "named by the rule"
			if rv == "" {
				rv = p.clock.at(v.asOf)
				why = fmt.Sprintf("the newest seen %v before the request", ex.rec.Start.Sub(v.asOf).Round(time.Millisecond))
			}
			if rv == "" {
				ex.rec.Fault = fmt.Sprintf("rewind: no resourceVersion seen by %s; served the current state", v.asOf.Format(time.RFC3339Nano))
				break
			}
			if floor, ok := listFloor(r.URL.Query()); !ok {
				ex.rec.Fault = "rewind: a LIST at an exact resourceVersion or a continued one is served as asked: no apiserver answers it from another point"
				break
			} else if n, err := strconv.ParseUint(rv, 10, 64); floor > 0 && err == nil && n < floor {
				// A LIST at resourceVersion=X (not 0) is served not older
				// than X by every apiserver, however far its watch cache
				// lags (it waits for the cache, or reads etcd): a relist
				// after 410 carries the informer's last resourceVersion, so
				// it never loses what the informer had seen.
				rv, why = strconv.FormatUint(floor, 10), fmt.Sprintf("its own resourceVersion: an apiserver behind (%s, %s) serves a LIST at resourceVersion=%d not older than that", rv, why, floor)
			}
			q := r.URL.Query()
			q.Set("resourceVersion", rv)
			q.Set("resourceVersionMatch", "Exact")
			r.URL.RawQuery = q.Encode()
			ex.rec.Fault = fmt.Sprintf("rewind: list served as of resourceVersion %s, %s", rv, why)
		case Reject:
			ex.rec.FaultKind = trace.FaultReject
			ex.rec.Fault = reject(w, r, info, v.code)
			ex.rec.Code = v.code
			ex.rec.Latency = time.Since(ex.rec.Start)
			p.trace.AddRequest(ex.rec)
			return
		case Freeze, Cut, Lose, Reset, Slow:
			ex.act, ex.hold = v.action, v.hold
		}
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

// listFloor is the oldest resourceVersion an apiserver may serve a LIST
// with query q from: 0 for resourceVersion=0 (Any: the watch cache, however
// far behind) and the value X of resourceVersion=X otherwise (NotOlderThan,
// the default match for a LIST with a resourceVersion). ok is false for a
// LIST no apiserver serves from another point than it asks: an Exact match,
// or a continued (paginated) one, whose token pins its resourceVersion.
func listFloor(q url.Values) (floor uint64, ok bool) {
	if q.Get("continue") != "" || q.Get("resourceVersionMatch") == string(metav1.ResourceVersionMatchExact) {
		return 0, false
	}
	n, err := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
	if err != nil {
		return 0, true
	}
	return n, true
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
	if holdsWhole(ex.info, resp) {
		// Hold the whole (small) object, record it, then let it go: a
		// client never sees an answer the trace does not have yet.
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
		c.readObject(ex, resp, body)
	}
	// Anything else (a log, proxied traffic, an upgrade) is recorded as its
	// headers arrive, then flows to the client as it arrives.
	ex.rec.Code = resp.StatusCode
	ex.rec.Latency = time.Since(ex.rec.Start)
	if resp.StatusCode/100 == 2 {
		c.p.clock.observe(time.Now(), ex.rec.ReturnedRV)
	}
	switch ex.act {
	case Freeze:
		ex.rec.FaultKind = trace.FaultFreeze
		ex.rec.Fault = "freeze: answered; every later request of this client is held unanswered"
	case Cut:
		ex.rec.FaultKind = trace.FaultCut
		ex.rec.Fault = "cut: applied by the apiserver, answer withheld from the client; every later request of it is held"
	case Lose:
		ex.rec.FaultKind = trace.FaultLose
		ex.rec.Fault = fmt.Sprintf("lose: answered %d by the apiserver; the client was told 504 Timeout (request did not complete within the allotted timeout) and keeps running", ex.rec.Code)
	case Reset:
		ex.rec.FaultKind = trace.FaultReset
		ex.rec.Fault = fmt.Sprintf("reset: answered %d by the apiserver; the client's stream was reset instead and it keeps running", ex.rec.Code)
	case Slow:
		// Held before it is recorded: the trace has the answer when the
		// client does, and says whether the client waited for it.
		t := time.NewTimer(ex.hold)
		select {
		case <-t.C:
		case <-resp.Request.Context().Done():
			t.Stop()
			ex.rec.Abandoned = true
		}
		ex.rec.Held = time.Since(ex.rec.Start) - ex.rec.Latency
		ex.rec.FaultKind = trace.FaultSlow
		ex.rec.Fault = fmt.Sprintf("slow: answer held %v after the apiserver gave it", ex.rec.Held.Round(time.Millisecond))
	}
	ex.done = true
	c.p.trace.AddRequest(ex.rec)
	switch ex.act {
	case Freeze:
		c.p.frozen.Store(c.Name, true)
	case Cut:
		c.p.frozen.Store(c.Name, true)
		return errCut
	case Lose:
		return errLost
	case Reset:
		return errReset
	}
	return nil
}

// errCut, errLost and errReset make the ReverseProxy hand a write's answer
// to errorHandler instead of forwarding it.
var (
	errCut   = errors.New("proxy: answer cut")
	errLost  = errors.New("proxy: answer lost")
	errReset = errors.New("proxy: stream reset")
)

// requestOf is what request rules see of r.
func requestOf(client string, info *request.RequestInfo, r *http.Request) call {
	q := r.URL.Query()
	rv := q.Get("resourceVersion")
	n, _ := strconv.ParseUint(rv, 10, 64)
	return call{
		client: client, verb: info.Verb, resource: info.Resource, subresource: info.Subresource,
		namespace: info.Namespace, name: info.Name,
		watchList: q.Get("sendInitialEvents") == "true",
		resumes:   rv != "" && rv != "0",
		rv:        n,
		continues: q.Get("continue") != "",
		dryRun:    isDryRun(r, info.Verb),
	}
}

// expiredWatch returns the response a kube-apiserver sends to a watch from a
// resourceVersion its watch cache no longer holds: the media type (from the
// client's Accept header: protobuf when accepted, else JSON) and one watch
// frame, an ERROR event of Status 410 Expired "too old resource version: rv
// (oldest)", encoded as the apiserver's watch server encodes events
// (apiserver handlers/response.go watchEncoder: the object by the negotiated
// encoder, wrapped in a metav1.WatchEvent by the stream serializer, framed).
func expiredWatch(accept string, gv schema.GroupVersion, rv, oldest string) (contentType string, frame []byte) {
	status := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s (%s)", rv, oldest)).Status()
	si := negotiated(accept)
	codecs := clientgoscheme.Codecs.WithoutConversion()
	var obj, event, out bytes.Buffer
	_ = codecs.EncoderForVersion(si.Serializer, gv).Encode(&status, &obj)
	_ = si.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: obj.Bytes()}}, &event)
	_, _ = si.StreamSerializer.Framer.NewFrameWriter(&out).Write(event.Bytes())
	contentType = si.MediaType
	if contentType != runtime.ContentTypeJSON {
		contentType += ";stream=watch"
	}
	return contentType, out.Bytes()
}

// negotiated is the serializer an apiserver answers with: protobuf when the
// client accepts it, else JSON.
func negotiated(accept string) runtime.SerializerInfo {
	mediaType := runtime.ContentTypeJSON
	if strings.Contains(accept, runtime.ContentTypeProtobuf) {
		mediaType = runtime.ContentTypeProtobuf
	}
	si, _ := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), mediaType)
	return si
}

// refuseWatchList answers a WatchList request as a kube-apiserver with the
// WatchList feature gate off does: its validation error, a Status encoded as
// the apiserver encodes errors (protobuf when the client accepts it, else
// JSON), and returns the status code.
func refuseWatchList(w http.ResponseWriter, r *http.Request, info *request.RequestInfo) int {
	status := apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", field.ErrorList{
		field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
	}).Status()
	writeStatus(w, r, info, status)
	return int(status.Code)
}

// writeStatus answers with status as a kube-apiserver encodes an error
// (responsewriters.ErrorNegotiated): protobuf when the client accepts it,
// else JSON, with Retry-After when the status asks for a retry.
func writeStatus(w http.ResponseWriter, r *http.Request, info *request.RequestInfo, status metav1.Status) {
	si := negotiated(r.Header.Get("Accept"))
	codecs := clientgoscheme.Codecs.WithoutConversion()
	w.Header().Set("Content-Type", si.MediaType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
	w.WriteHeader(int(status.Code))
	_ = codecs.EncoderForVersion(si.Serializer, gv).Encode(&status, w)
}

// reject answers a write as a kube-apiserver refuses one before it is
// applied (see Reject), and says what it answered.
func reject(w http.ResponseWriter, r *http.Request, info *request.RequestInfo, code int) string {
	switch code {
	case http.StatusInternalServerError:
		// An etcd error is no API status: the apiserver answers it as an
		// unknown 500 with the error's words (responsewriters.ErrorToAPIStatus).
		writeStatus(w, r, info, metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: http.StatusInternalServerError, Message: "etcdserver: request timed out",
		})
		return "reject: answered 500 etcdserver: request timed out, never forwarded (etcd did not commit it)"
	case http.StatusServiceUnavailable:
		status := apierrors.NewServiceUnavailable("the server is currently unable to handle the request").Status()
		status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		writeStatus(w, r, info, status)
		return "reject: answered 503 ServiceUnavailable, never forwarded (an apiserver restarting behind a load balancer)"
	}
	// API Priority and Fairness (and max-in-flight) answer in plain text
	// (filters/priority-and-fairness.go tooManyRequests).
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
	return "reject: answered 429 Too many requests, Retry-After: 1, never forwarded (API Priority and Fairness); client-go retries it after 1 s"
}

func (c *Client) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errCut):
		<-r.Context().Done()        // the answer never comes; the client is killed
		panic(http.ErrAbortHandler) // and if it is not, it gets none at all
	case errors.Is(err, errLost):
		info, _ := c.p.infos.NewRequestInfo(r)
		writeStatus(w, r, info, apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0).Status())
		return
	case errors.Is(err, errReset):
		panic(http.ErrAbortHandler) // an HTTP/2 RST_STREAM; over HTTP/1.1, a closed connection
	}
	ex, _ := r.Context().Value(exchangeKey{}).(*exchange)
	switch {
	case r.Context().Err() != nil:
		if ex != nil && !ex.done {
			ex.rec.Abandoned = true
		}
	default:
		c.p.Log.Info("proxy: upstream request failed", "client", c.Name, "method", r.Method, "path", r.URL.Path, "error", err.Error())
		if ex != nil && !ex.done {
			ex.rec.RelayError = err.Error()
		}
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
// object body of res, redacted (package redact); nil if none is present or
// the body is not JSON.
func jsonFields(body []byte, contentType string, res redact.Resource, paths []string) map[string]string {
	if !strings.Contains(contentType, "json") {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	return FieldValues(obj, res, paths)
}

// FieldValues returns the values at the dotted paths of obj, an object of
// res decoded from JSON, as the trace records them (trace.Request.Fields):
// JSON-encoded and redacted (package redact); nil if none is present.
// Values compare equal as strings whoever wrote them.
func FieldValues(obj map[string]any, res redact.Resource, paths []string) map[string]string {
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
		enc, err := json.Marshal(redact.Value(res, path, v))
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
		Preconditions struct { // a delete's DeleteOptions
			ResourceVersion string `json:"resourceVersion"`
		} `json:"preconditions"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	return or(obj.Metadata.ResourceVersion, obj.Preconditions.ResourceVersion)
}

// admits reports whether r carries the client's bearer token.
func (c *Client) admits(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(c.token)) == 1
}

// unauthorized answers a request without the client's token as an
// apiserver answers one without valid credentials: 401 and a Status, which
// kubectl and client-go show as they show the apiserver's own.
func unauthorized(w http.ResponseWriter, client string) {
	status := apierrors.NewUnauthorized(fmt.Sprintf("stalefuzz proxy: the listener of client %q admits only requests with that client's bearer token: use the rest.Config (Client.Config) or the kubeconfig (Client.Kubeconfig) the proxy gave that client", client)).Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(&status)
}

// bodyName returns metadata.name of an object body (JSON or protobuf), or
// "".
func bodyName(body []byte, contentType string) string {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/vnd.kubernetes.protobuf" {
		const magic = "k8s\x00"
		var u runtime.Unknown
		if !bytes.HasPrefix(body, []byte(magic)) || u.Unmarshal(body[len(magic):]) != nil {
			return ""
		}
		meta, ok := protoField(u.Raw, 1)
		if !ok {
			return ""
		}
		name, _ := protoField(meta, 1) // ObjectMeta.name
		return string(name)
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	return obj.Metadata.Name
}
