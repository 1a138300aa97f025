// Package loopback guards the proxy's listeners on 127.0.0.1 against the
// requests a local web page can make: through DNS rebinding, a page served
// from attacker.example can reach a loopback port under its own host name,
// and a browser sends that name in the Host header. A handler wrapped by
// SameHost answers only requests addressed to the loopback address it
// listens on, by IP or as localhost.
//
// Package loopback reads no environment variables.
package loopback

import (
	"fmt"
	"net"
	"net/http"
)

// Hosts are the Host header values that address a listener on addr
// (host:port) from this machine: addr itself, and 127.0.0.1, ::1 and
// localhost with its port.
func Hosts(addr string) map[string]bool {
	_, port, _ := net.SplitHostPort(addr)
	return map[string]bool{
		addr:                                true,
		net.JoinHostPort("localhost", port): true,
		net.JoinHostPort("127.0.0.1", port): true,
		net.JoinHostPort("::1", port):       true,
	}
}

// SameHost refuses, with 403 Forbidden naming the host, every request whose
// Host header is not one of Hosts(addr); what (e.g. "the control endpoint")
// names the listener in the refusal.
func SameHost(addr, what string, h http.Handler) http.Handler {
	allowed := Hosts(addr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[r.Host] {
			http.Error(w, fmt.Sprintf("host %q not allowed: %s answers requests to %s only", r.Host, what, addr), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
