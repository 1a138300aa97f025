package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy/internal/loopback"
)

// control is the control endpoint: plain HTTP on loopback.
type control struct {
	addr   string // host:port it listens on
	srv    *http.Server
	served chan struct{}

	once sync.Once
	err  error
}

// startControl listens on the --control address and serves the endpoint.
func (s *session) startControl() (*control, error) {
	addr, err := loopbackAddr(s.o.control)
	if err != nil {
		return nil, fmt.Errorf("--control %q: %w", s.o.control, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("unable to listen for the control endpoint on %s: %w", addr, err)
	}
	c := &control{addr: ln.Addr().String(), served: make(chan struct{})}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /mark", func(w http.ResponseWriter, r *http.Request) {
		mark, n := s.setMark("POST /mark")
		fmt.Fprintf(w, "mark set at %s: %d rule(s) in force\n", mark.Format(time.RFC3339Nano), n)
	})
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		msg, err := s.reload("POST /reload")
		if err != nil {
			http.Error(w, fmt.Sprintf("%v\nthe old rules stay in force", err), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintln(w, msg)
	})
	mux.HandleFunc("GET /trace", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jsonl")
		if err := s.trace.writeJSONL(w); err != nil {
			s.log.printf("stalefuzz: GET /trace: %v", err)
		}
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "stalefuzz proxy control endpoint\n"+
			"POST /mark    set the mark to now and put the rules in force\n"+
			"POST /reload  re-read the rules file, keeping the mark\n"+
			"GET  /trace   the trace so far, as JSONL\n")
	})
	c.srv = &http.Server{
		Handler:           loopback.SameHost(c.addr, "the control endpoint", http.NewCrossOriginProtection().Handler(mux)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(c.served)
		_ = c.srv.Serve(ln)
	}()
	return c, nil
}

// stop shuts the endpoint down, letting requests in flight finish within a
// budget, and returns once it no longer serves. It is idempotent.
func (c *control) stop() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), controlShutdown)
		defer cancel()
		if err := c.srv.Shutdown(ctx); err != nil {
			c.err = fmt.Errorf("control endpoint: requests still in flight after %v, closed: %w", controlShutdown, err)
			_ = c.srv.Close()
		}
		<-c.served
	})
	return c.err
}
