package proxy

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
)

// isUpgrade reports whether h asks to switch protocols (Connection: Upgrade
// and an Upgrade header), as exec, attach and port-forward (SPDY or
// WebSocket) and WebSockets through a pod or service proxy do.
func isUpgrade(h http.Header) bool {
	if h.Get("Upgrade") == "" {
		return false
	}
	for _, v := range h["Connection"] {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// upgradeRouter sends requests that switch protocols over an HTTP/1.1-only
// transport and everything else over the main one. The main transport
// negotiates HTTP/2 with the apiserver, and HTTP/2 has no Upgrade: Go's
// HTTP/2 transport refuses such a request before sending it ("http2: invalid
// Upgrade request header"), so SPDY exec, attach and port-forward never
// reached the apiserver.
type upgradeRouter struct{ main, upgrades http.RoundTripper }

func (t upgradeRouter) RoundTrip(r *http.Request) (*http.Response, error) {
	if isUpgrade(r.Header) {
		return t.upgrades.RoundTrip(r)
	}
	return t.main.RoundTrip(r)
}

// hijackTracker is the ResponseWriter a client's server hands the proxy. It
// lets Stop close the client connections the ReverseProxy hijacks to relay an
// upgraded connection: http.Server.Close does not close hijacked connections,
// and an upgraded one stays open as long as both ends keep it.
type hijackTracker struct {
	http.ResponseWriter
	p *Proxy
}

func (w hijackTracker) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w hijackTracker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	hc, err := w.p.track(conn, w.p.hijacked)
	if err != nil {
		return nil, nil, err
	}
	return hc, brw, nil
}

// CloseWrite half-closes the connection, so that the end of the apiserver's
// side reaches the client while the client may still send (the ReverseProxy
// does this when the connection supports it, as a TCP connection does).
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// closeHijacked closes every hijacked client connection; the ReverseProxy's
// relay of each then ends.
func (p *Proxy) closeHijacked() { p.closeAll(p.hijacked) }
