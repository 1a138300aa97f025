package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/stalefuzz/stalefuzz/proxy/internal/loopback"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// DefaultMaxFrame is the largest watch event the proxy parses when
// Proxy.MaxFrame is zero. The apiserver's own limit on an object is far lower
// (etcd's default request limit is 1.5 MiB).
const DefaultMaxFrame = 16 << 20

// Proxy fronts one apiserver. The zero value is not usable: set Upstream, then
// call Start.
type Proxy struct {
	// Upstream is the apiserver and the credentials the proxy uses for every
	// client. Required.
	Upstream *rest.Config

	// Log receives the proxy's warnings (a stream it could not parse and passed
	// through, an upstream error). Zero: discarded.
	Log logr.Logger

	// Fields lists dotted JSON paths ("status.plan.id") whose values the trace
	// records from each successful JSON object response (reads and writes,
	// gzip-encoded ones included), so that oracles can follow a value across
	// writers; a credential is recorded redacted (package redact). Zero:
	// none.
	Fields []string

	// MaxFrame bounds the size of one watch event the proxy parses; a larger
	// one makes the rest of its stream pass through undelayed. Zero:
	// DefaultMaxFrame.
	MaxFrame int

	upstream  *url.URL
	serving   *tls.Config       // the clients' listeners': a certificate of the proxy's own
	caPEM     []byte            // what clients trust it by
	transport http.RoundTripper // HTTP/2 when the apiserver offers it
	upgrades  http.RoundTripper // HTTP/1.1 only, for requests that switch protocols
	infos     *request.RequestInfoFactory
	rules     atomic.Pointer[ruleSet]
	frozen    sync.Map // client name → true: a Freeze or Cut fired for it
	clock     rvClock
	trace     trace.Log
	nextID    atomic.Uint64

	stopCtx  context.Context
	stopNow  context.CancelFunc
	handlers sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopped  bool
	clients  map[string]*Client
	streams  map[*stream]struct{}
	conns    map[*trackedConn]struct{}
	hijacked map[*trackedConn]struct{}
}

// Client is one named client's own front door to the proxy: a listener on
// 127.0.0.1 that admits only that client, so that everything arriving there
// is its. It admits a request only when it carries the client's bearer
// token (Config and Kubeconfig carry it) and names the listener's loopback
// address as its Host; it refuses any other with 401 or 403 and forwards
// nothing of it.
type Client struct {
	Name string
	// URL is the client's endpoint, e.g. https://127.0.0.1:40123, served
	// with a certificate of the proxy's own (Config and Kubeconfig trust
	// it).
	URL string

	token  string // the bearer token the listener admits; stripped before forwarding
	p      *Proxy
	ln     net.Listener
	server *http.Server
	rp     *httputil.ReverseProxy
	served chan struct{}
}

// Start prepares the upstream transport. Clients are added with Client.
func (p *Proxy) Start() (retErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("proxy: Start called twice")
	}
	if p.Upstream == nil {
		return errors.New("proxy: Upstream is required")
	}
	u, err := url.Parse(p.Upstream.Host)
	if err != nil || u.Host == "" {
		return fmt.Errorf("proxy: unable to parse upstream host %q: %v", p.Upstream.Host, err)
	}
	cfg := rest.CopyConfig(p.Upstream)
	// A Dial of our own keeps this transport out of client-go's shared cache,
	// and lets Stop close every upstream connection it made.
	cfg.Dial = p.dial
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("proxy: unable to build transport for %s: %w", p.Upstream.Host, err)
	}
	// HTTP/2 cannot switch protocols: exec, attach, port-forward and
	// WebSockets go over a transport that offers only HTTP/1.1 (as
	// client-go's own SPDY and WebSocket dialers do).
	cfg.NextProtos = []string{"http/1.1"}
	upgrades, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("proxy: unable to build HTTP/1.1 transport for %s: %w", p.Upstream.Host, err)
	}
	// The clients' listeners speak TLS, with a certificate of the proxy's
	// own for 127.0.0.1: client-go sends a kubeconfig's token only to an
	// https server. HTTP/1.1 only, as they spoke before: an upgrade
	// (exec, port-forward) needs it, and every stream gets its own
	// connection.
	cert, certPEM, err := servingCert()
	if err != nil {
		return fmt.Errorf("proxy: unable to make a serving certificate for the clients' listeners: %w", err)
	}
	p.serving = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	p.caPEM = certPEM
	p.upstream, p.transport, p.upgrades = u, rt, upgrades
	p.infos = &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}
	if p.MaxFrame <= 0 {
		p.MaxFrame = DefaultMaxFrame
	}
	p.stopCtx, p.stopNow = context.WithCancel(context.Background())
	p.clients = map[string]*Client{}
	p.streams = map[*stream]struct{}{}
	p.conns = map[*trackedConn]struct{}{}
	p.hijacked = map[*trackedConn]struct{}{}
	p.started = true
	return nil
}

// Client returns the named client's endpoint, creating its listener on first
// use.
func (p *Proxy) Client(name string) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.stopped {
		return nil, fmt.Errorf("proxy: unable to add client %q: proxy not running", name)
	}
	if c, ok := p.clients[name]; ok {
		return c, nil
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("proxy: unable to make a token for client %q: %w", name, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: unable to listen for client %q: %w", name, err)
	}
	c := &Client{Name: name, URL: "https://" + ln.Addr().String(), token: hex.EncodeToString(token), p: p, ln: ln, served: make(chan struct{})}
	c.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.upstream)
			pr.Out.Host = p.upstream.Host
			if ex, _ := pr.In.Context().Value(exchangeKey{}).(*exchange); ex != nil && ex.info.Verb == "watch" {
				// The apiserver gzips watch streams for clients that accept it,
				// and the proxy must read the frames. Every client accepts an
				// identity-encoded response. Asking for one explicitly keeps
				// Go's transport from adding gzip on its own: the apiserver
				// would compress every event and the proxy decompress it
				// (a tenth of the proxy's CPU under load, make bench).
				pr.Out.Header.Set("Accept-Encoding", "identity")
			}
		},
		ErrorLog:       log.New(logWriter{p.Log.V(1)}, "", 0),
		Transport:      upgradeRouter{main: p.transport, upgrades: p.upgrades},
		FlushInterval:  -1,
		ModifyResponse: c.modifyResponse,
		ErrorHandler:   c.errorHandler,
	}
	c.server = &http.Server{
		Handler: loopback.SameHost(ln.Addr().String(), fmt.Sprintf("the stalefuzz proxy's listener for client %q", name),
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.ServeHTTP(hijackTracker{ResponseWriter: w, p: p}, r)
			})),
		ReadHeaderTimeout: 30 * time.Second,
		// A client killed mid-handshake (a restart) is the proxy's
		// business at V(1), not a line on the test's stderr.
		ErrorLog: log.New(logWriter{p.Log.V(1)}, "", 0),
	}
	p.clients[name] = c
	go func() {
		defer close(c.served)
		_ = c.server.Serve(tls.NewListener(ln, p.serving))
	}()
	return c, nil
}

// Config returns a rest.Config for an in-process client: everything it sends
// is this client's. It carries the client's bearer token, which the proxy
// checks and strips, adding the upstream credentials instead. Its transport
// reports each write's call site (trace.Request.Caller): the first stack
// frame outside client-go, controller-runtime and apimachinery.
func (c *Client) Config() *rest.Config {
	return &rest.Config{
		Host:            c.URL,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.p.caPEM},
		QPS:             c.p.Upstream.QPS,
		Burst:           c.p.Upstream.Burst,
		UserAgent:       "stalefuzz-" + c.Name,
		WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return callerTransport{next: rt} },
	}
}

// Kubeconfig returns a kubeconfig for an out-of-process client in any
// language. Its only credential is the client's bearer token, which admits it
// to its listener and nowhere else: the proxy strips it and adds the
// upstream credentials.
func (c *Client) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stalefuzz"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: c.p.caPEM}
	cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Token: c.token}
	cfg.Contexts["stalefuzz"] = &clientcmdapi.Context{Cluster: "stalefuzz", AuthInfo: c.Name, Namespace: "default"}
	cfg.CurrentContext = "stalefuzz"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: unable to write kubeconfig for client %q: %w", c.Name, err)
	}
	return b, nil
}

// WriteKubeconfig writes Kubeconfig to path with mode 0600.
func (c *Client) WriteKubeconfig(path string) error {
	b, err := c.Kubeconfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("proxy: unable to write kubeconfig for client %q: %w", c.Name, err)
	}
	return nil
}

// SetRules atomically replaces the rules; windows are relative to mark.
// Events already held keep the release time they were given on arrival.
// Every frozen client is thawed.
func (p *Proxy) SetRules(mark time.Time, rules ...Rule) error {
	if err := validate(0, rules); err != nil {
		return err
	}
	p.frozen.Clear()
	p.rules.Store(newRuleSet(mark, rules))
	p.trace.AddRules(traced(time.Now(), mark, false, 0, rules))
	return nil
}

// traced is a change of rules as the trace records it.
func traced(at, mark time.Time, added bool, first int, rules []Rule) trace.Rules {
	tr := trace.Rules{At: at, Mark: mark, Added: added}
	for i, r := range rules {
		tr.Rules = append(tr.Rules, trace.Rule{Index: first + i, Client: r.Client, Action: r.Action.String(), Text: r.String(), From: r.From, To: r.To})
	}
	return tr
}

// AddRules appends rules to those in force, under the same mark, keeping the
// state of the rules already there (After counts, what Break and Freeze have
// done). Their indexes (trace.Event.Rule, trace.Request.Rule) follow those of
// the rules already in force.
func (p *Proxy) AddRules(rules ...Rule) error {
	for {
		old := p.rules.Load()
		n := 0
		if old != nil {
			n = len(old.rules)
		}
		if err := validate(n, rules); err != nil {
			return err
		}
		rs := newRuleSet(time.Now(), rules)
		if old != nil {
			rs.mark = old.mark
			rs.rules = append(slices.Clone(old.rules), rs.rules...)
		}
		if p.rules.CompareAndSwap(old, rs) {
			p.trace.AddRules(traced(time.Now(), rs.mark, true, n, rules))
			return nil
		}
	}
}

func validate(first int, rules []Rule) error {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("proxy: rule %d (%v): %w", first+i, r, err)
		}
	}
	return nil
}

// Thaw lets a client that a Freeze or Cut stopped send requests again (its
// replacement, after a restart). Requests it sent while frozen stay
// unanswered.
func (p *Proxy) Thaw(client string) { p.frozen.Delete(client) }

func (p *Proxy) isFrozen(client string) bool {
	_, ok := p.frozen.Load(client)
	return ok
}

// Trace is the log of every request and watch event through the proxy.
func (p *Proxy) Trace() *trace.Log { return &p.trace }

// Pending returns how many watch events are held or delayed right now, over
// every stream.
func (p *Proxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for s := range p.streams {
		n += s.pending()
	}
	return n
}

// Stop closes every listener, stream and connection, upgraded ones included,
// and waits for every goroutine the proxy started. It is idempotent.
func (p *Proxy) Stop() error {
	p.mu.Lock()
	if !p.started || p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	clients := make([]*Client, 0, len(p.clients))
	for _, c := range p.clients {
		clients = append(clients, c)
	}
	p.mu.Unlock()

	p.stopNow() // cancels every upstream request, so every stream ends
	// http.Server.Close leaves hijacked connections alone: each upgraded
	// connection is closed here, so its relay ends.
	p.closeHijacked()
	var errs []error
	for _, c := range clients {
		if err := c.server.Close(); err != nil {
			errs = append(errs, fmt.Errorf("proxy: unable to close listener of client %q: %w", c.Name, err))
		}
		<-c.served
	}
	p.handlers.Wait()
	utilnet.CloseIdleConnectionsFor(p.transport)
	utilnet.CloseIdleConnectionsFor(p.upgrades)
	// An HTTP/2 connection may still be winding down its cancelled streams,
	// so it is not idle yet: close it.
	p.closeAll(p.conns)
	return errors.Join(errs...)
}

// ClientNames lists the clients added so far, sorted.
func (p *Proxy) ClientNames() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.clients))
	for n := range p.clients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (p *Proxy) addStream(s *stream) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.streams[s] = struct{}{}
	return true
}

func (p *Proxy) removeStream(s *stream) {
	p.mu.Lock()
	delete(p.streams, s)
	p.mu.Unlock()
}

// logWriter adapts the ReverseProxy's log (a client going away mid-stream, a
// stream closed by Stop) to the proxy's logr.Logger.
type logWriter struct{ l logr.Logger }

func (w logWriter) Write(b []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(b)))
	return len(b), nil
}

// dial opens an upstream connection that Stop can close.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, err := p.track(c, p.conns)
	if err != nil {
		return nil, err // not a nil *trackedConn in a non-nil net.Conn
	}
	return tc, nil
}

// trackedConn is a connection Stop closes: an upstream one (in p.conns) or a
// client one hijacked for an upgrade (in p.hijacked).
type trackedConn struct {
	net.Conn
	p    *Proxy
	set  map[*trackedConn]struct{}
	once sync.Once
}

// track records c in set, or closes it if the proxy is stopping.
func (p *Proxy) track(c net.Conn, set map[*trackedConn]struct{}) (*trackedConn, error) {
	tc := &trackedConn{Conn: c, p: p, set: set}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		_ = c.Close()
		return nil, errors.New("proxy: stopped")
	}
	set[tc] = struct{}{}
	return tc, nil
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.p.mu.Lock()
		delete(c.set, c)
		c.p.mu.Unlock()
	})
	return c.Conn.Close()
}

// closeAll closes every connection in set.
func (p *Proxy) closeAll(set map[*trackedConn]struct{}) {
	p.mu.Lock()
	conns := make([]*trackedConn, 0, len(set))
	for c := range set {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
