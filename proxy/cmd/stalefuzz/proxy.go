package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/rulesfile"
)

// proxyOptions are the flags of stalefuzz proxy.
type proxyOptions struct {
	kubeconfig, context string
	clients             []string
	rules, trace        string
	out                 string
	control             string
	markNow             bool
	traceInMemory       bool
	fields              []string
	verbosity           int
	profile             string
}

// Budgets of the proxy command's own waits.
const (
	upstreamCheckTimeout = 10 * time.Second
	controlShutdown      = 5 * time.Second
)

func newProxyCmd() *cobra.Command {
	var o proxyOptions
	cmd := &cobra.Command{
		Use:   "proxy --kubeconfig FILE --client NAME... --rules FILE --trace FILE",
		Short: "Run the informer proxy in front of the apiserver of a kubeconfig",
		Long: `proxy runs the informer proxy in front of the apiserver of a kubeconfig and
writes a kubeconfig for each --client, DIR/NAME.kubeconfig, to point that
client at (KUBECONFIG=DIR/NAME.kubeconfig kubectl ..., or a controller's
--kubeconfig).

The rules in --rules (YAML; see package proxy/rulesfile) are relative to a
mark, and none is in force before the first: SIGUSR1 or POST /mark on the
control endpoint sets the mark to now and puts them in force (--mark-now: at
start). SIGHUP or POST /reload re-reads the file under the same mark; a file
with errors leaves the old rules in force. GET /trace on the control
endpoint answers the trace so far as JSONL. Its address is printed and
written to DIR/control.addr.

The trace is written to --trace as JSONL while it grows, each entry once it
is final, so that memory keeps only the watch events a rule holds
(--trace-in-memory: all of it, written on exit). SIGINT or SIGTERM stops
the proxy, completes the trace, removes DIR/control.addr and exits 0.`,
		Example: `  cat > rules.yaml <<EOF
  rules:
    - client: my-controller
      resource: configmaps
      types: [MODIFIED]
      action: hold    # delay, hold, drop, break, expire, rewind, freeze, cut
      from: 0s
      to: 3s
  EOF
  stalefuzz proxy --kubeconfig ~/.kube/config --client my-controller \
      --rules rules.yaml --trace trace.jsonl --out run/ &
  KUBECONFIG=run/my-controller.kubeconfig ./my-controller &
  curl -X POST "http://$(cat run/control.addr)/mark"   # the rules are in force from now
  kill -INT %1; wait %1; stalefuzz report trace.jsonl`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before anything else: an early SIGUSR1 or SIGHUP must not kill
			// the process (their default action).
			sigs := make(chan os.Signal, 8)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
			defer signal.Stop(sigs)
			if err := o.validate(cmd); err != nil {
				return err
			}
			return runProxy(cmd.Context(), o, cmd.ErrOrStderr(), sigs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the apiserver to proxy (required)")
	f.StringVar(&o.context, "context", "", "context of the kubeconfig to use (default: its current context)")
	f.StringSliceVar(&o.clients, "client", nil, "name of a client to give a listener and a kubeconfig; repeated or comma-separated (at least one)")
	f.StringVar(&o.rules, "rules", "", "YAML file of rules (required; see package proxy/rulesfile)")
	f.StringVar(&o.trace, "trace", "", "file to write the trace to as JSONL, as it grows and complete on exit (required)")
	f.StringVar(&o.out, "out", ".", "directory for the kubeconfigs and control.addr (created if missing)")
	f.StringVar(&o.control, "control", "127.0.0.1:0", "loopback address of the control endpoint (port 0: any free port)")
	f.BoolVar(&o.markNow, "mark-now", false, "set the mark at start, so that the rules are in force at once")
	f.BoolVar(&o.traceInMemory, "trace-in-memory", false, "keep the whole trace in memory and write --trace once, on exit (default: --trace grows during the run and memory keeps only the events still held)")
	f.StringArrayVar(&o.fields, "fields", nil, "dotted JSON path whose value the trace records from each response (repeated)")
	f.IntVarP(&o.verbosity, "v", "v", 0, "verbosity of the proxy's log (0: warnings; 1: also connection errors)")
	f.StringVar(&o.profile, "profile", "", "directory to write the proxy's own CPU profile (cpu.pprof, the whole run) and allocation profile (allocs.pprof) to on exit, for go tool pprof")
	return cmd
}

var clientName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// validate checks the flags that need no file or network.
func (o *proxyOptions) validate(cmd *cobra.Command) error {
	var missing []string
	for _, f := range []struct{ name, v string }{{"kubeconfig", o.kubeconfig}, {"rules", o.rules}, {"trace", o.trace}} {
		if f.v == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	if len(o.clients) == 0 {
		missing = append(missing, "--client")
	}
	if len(missing) > 0 {
		return usagef(cmd, "required: %s", strings.Join(missing, ", "))
	}
	seen := map[string]bool{}
	for _, c := range o.clients {
		if !clientName.MatchString(c) {
			return usagef(cmd, "--client %q: want letters, digits, '.', '_' and '-', starting with a letter or digit (it names DIR/%s.kubeconfig)", c, c)
		}
		if seen[c] {
			return usagef(cmd, "--client %q given twice", c)
		}
		seen[c] = true
	}
	if _, err := loopbackAddr(o.control); err != nil {
		return usagef(cmd, "--control %q: %v", o.control, err)
	}
	return nil
}

// loopbackAddr checks that addr is host:port with a loopback host, and returns
// it in the form to listen on.
func loopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", errors.New("the control endpoint listens on a loopback address only (127.0.0.1, ::1 or localhost)")
	}
	return net.JoinHostPort(host, port), nil
}

// session is one run of stalefuzz proxy.
type session struct {
	o     proxyOptions
	log   *lineWriter
	px    *proxy.Proxy
	trace *traceFile
	paths []string // what this run created, removed on exit (a failed start removes kubeconfigs too)

	mu    sync.Mutex
	rules []proxy.Rule
	mark  time.Time // zero until the first mark
}

// runProxy runs the proxy until a SIGINT or SIGTERM arrives on sigs (or ctx
// ends), acting on SIGUSR1 (mark) and SIGHUP (reload) meanwhile.
func runProxy(ctx context.Context, o proxyOptions, stderr io.Writer, sigs <-chan os.Signal) (retErr error) {
	s := &session{o: o, log: &lineWriter{w: stderr}}
	if o.profile != "" {
		stop, err := startProfile(o.profile)
		if err != nil {
			return err
		}
		defer func() {
			if err := stop(); err != nil {
				s.log.printf("stalefuzz: %v", err)
			}
		}()
	}
	var kubeconfigs []string
	var createdOut bool
	defer func() {
		// A failed start leaves nothing behind: not even the kubeconfigs,
		// which would point at a closed port.
		if retErr != nil {
			for _, p := range kubeconfigs {
				_ = os.Remove(p)
			}
			if createdOut {
				_ = os.Remove(o.out) // only if empty
			}
		}
	}()

	rules, err := rulesfile.Read(o.rules)
	if err != nil {
		return fmt.Errorf("unable to read rules:\n%w", err)
	}
	s.rules = rules
	if err := checkWritable(o.trace); err != nil {
		return fmt.Errorf("unable to write the trace to %s: %w", o.trace, err)
	}
	upstream, server, err := loadKubeconfig(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.out); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(o.out, 0o700); err != nil {
			return fmt.Errorf("unable to create output directory %s: %w", o.out, err)
		}
		createdOut = true
	}

	s.px = &proxy.Proxy{
		Upstream: upstream,
		Fields:   o.fields,
		Log: funcr.New(func(prefix, args string) {
			s.log.printf("stalefuzz: proxy: %s", args)
		}, funcr.Options{Verbosity: o.verbosity}),
	}
	if err := s.px.Start(); err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			_ = s.px.Stop()
		}
	}()

	s.log.printf("stalefuzz: proxying %s (kubeconfig %s%s)", server, o.kubeconfig, inContext(o.context))
	s.checkUpstream(upstream)
	// Before any client can send a request: the trace file gets everything.
	if s.trace, err = openTrace(o.trace, s.px.Trace(), o.traceInMemory, s.log.printf); err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			s.trace.abandon()
		}
	}()
	for _, name := range o.clients {
		c, err := s.px.Client(name)
		if err != nil {
			return err
		}
		b, err := c.Kubeconfig()
		if err != nil {
			return err
		}
		path := filepath.Join(o.out, name+".kubeconfig")
		if err := writeFile(path, b, 0o600); err != nil {
			return fmt.Errorf("unable to write kubeconfig of client %q: %w", name, err)
		}
		kubeconfigs = append(kubeconfigs, path)
		s.log.printf("stalefuzz: client %q listens on %s; its kubeconfig is %s\n"+
			"  use it: KUBECONFIG=%s kubectl get pods, or point a controller at it (--kubeconfig %s)",
			name, c.URL, path, path, path)
	}
	s.describeRules("read", rules)

	ctl, err := s.startControl()
	if err != nil {
		return err
	}
	defer func() {
		if err := ctl.stop(); err != nil {
			s.log.printf("stalefuzz: %v", err)
		}
	}()
	// control.addr is written last: once it exists, everything is in place.
	addrFile := filepath.Join(o.out, "control.addr")
	s.log.printf("stalefuzz: control endpoint http://%s (address in %s): POST /mark, POST /reload, GET /trace", ctl.addr, addrFile)
	if o.markNow {
		s.setMark("--mark-now")
	} else {
		s.log.printf("stalefuzz: no rule is in force until the mark: kill -USR1 %d, or curl -X POST http://%s/mark", os.Getpid(), ctl.addr)
	}
	defer func() {
		for _, p := range s.paths {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.log.printf("stalefuzz: unable to remove %s: %v", p, err)
			}
		}
	}()
	if err := writeFile(addrFile, []byte(ctl.addr+"\n"), 0o644); err != nil {
		return fmt.Errorf("unable to write the control address: %w", err)
	}
	s.paths = append(s.paths, addrFile)

	var stopBy string
	for stopBy == "" {
		select {
		case <-ctx.Done():
			stopBy = context.Cause(ctx).Error()
		case sig := <-sigs:
			switch sig {
			case syscall.SIGUSR1:
				s.setMark("SIGUSR1")
			case syscall.SIGHUP:
				_, _ = s.reload("SIGHUP")
			default:
				stopBy = signalName(sig)
			}
		}
	}

	s.log.printf("stalefuzz: stopping (%s)", stopBy)
	// A second SIGINT or SIGTERM exits at once, without the trace.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if sig == syscall.SIGINT || sig == syscall.SIGTERM {
					s.log.printf("stalefuzz: %s again: exiting without writing the trace", signalName(sig))
					for _, p := range s.paths {
						_ = os.Remove(p)
					}
					os.Exit(1)
				}
			}
		}
	}()
	var errs []error
	if err := ctl.stop(); err != nil {
		errs = append(errs, err)
	}
	if err := s.px.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("unable to stop the proxy cleanly: %w", err))
	}
	if msg, err := s.trace.finish(); err != nil {
		errs = append(errs, err)
	} else {
		s.log.printf("stalefuzz: %s", msg)
	}
	if len(kubeconfigs) > 0 {
		s.log.printf("stalefuzz: kept %s", strings.Join(kubeconfigs, ", "))
	}
	return errors.Join(errs...)
}

// startProfile starts the CPU profile into dir/cpu.pprof; the function it
// returns stops it and writes the allocation profile to dir/allocs.pprof.
func startProfile(dir string) (func() error, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("unable to create profile directory %s: %w", dir, err)
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("unable to write the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		_ = cpu.Close()
		return nil, fmt.Errorf("unable to start the CPU profile %s: %w", cpu.Name(), err)
	}
	return func() error {
		pprof.StopCPUProfile()
		errs := []error{cpu.Close()}
		allocs := filepath.Join(dir, "allocs.pprof")
		f, err := os.Create(allocs)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("unable to write the allocation profile: %w", err))...)
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			errs = append(errs, fmt.Errorf("unable to write the allocation profile %s: %w", allocs, err))
		}
		return errors.Join(append(errs, f.Close())...)
	}, nil
}

func inContext(name string) string {
	if name == "" {
		return ", its current context"
	}
	return ", context " + name
}

func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		switch s {
		case syscall.SIGINT:
			return "SIGINT"
		case syscall.SIGTERM:
			return "SIGTERM"
		}
	}
	return sig.String()
}

// loadKubeconfig returns the rest.Config of a kubeconfig's context and the
// server it names.
func loadKubeconfig(path, context string) (*rest.Config, string, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context},
	)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("unable to load kubeconfig %s%s: %w", path, inContext(context), err)
	}
	return cfg, cfg.Host, nil
}

// checkUpstream asks the apiserver its version, and warns when it does not
// answer: the proxy runs anyway (the apiserver may come up later).
func (s *session) checkUpstream(upstream *rest.Config) {
	cfg := rest.CopyConfig(upstream)
	cfg.Timeout = upstreamCheckTimeout
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		s.log.printf("stalefuzz: warning: unable to build a client for %s: %v", upstream.Host, err)
		return
	}
	defer utilnet.CloseIdleConnectionsFor(hc.Transport)
	resp, err := hc.Get(strings.TrimSuffix(upstream.Host, "/") + "/version")
	if err != nil {
		s.log.printf("stalefuzz: warning: the apiserver at %s does not answer (%v); proxying anyway", upstream.Host, err)
		return
	}
	defer resp.Body.Close()
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); resp.StatusCode != http.StatusOK || err != nil {
		s.log.printf("stalefuzz: warning: the apiserver at %s answers GET /version with %s; proxying anyway", upstream.Host, resp.Status)
		return
	}
	s.log.printf("stalefuzz: the apiserver at %s answers: Kubernetes %s", upstream.Host, v.GitVersion)
}

// describeRules prints the rules and warns about clients no rule can match.
func (s *session) describeRules(verb string, rules []proxy.Rule) {
	s.log.printf("stalefuzz: %s %d rule(s) from %s%s", verb, len(rules), s.o.rules, map[bool]string{true: ":", false: ""}[len(rules) > 0])
	for i, r := range rules {
		s.log.printf("  rule %d (trace index %d): %v", i+1, i, r)
		if r.Client != "" && !slices.Contains(s.o.clients, r.Client) {
			s.log.printf("  warning: rule %d names client %q, which is not a --client (%s): it never matches", i+1, r.Client, strings.Join(s.o.clients, ", "))
		}
	}
}

// setMark sets the mark to now and puts the rules in force.
func (s *session) setMark(by string) (time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mark = time.Now()
	if err := s.px.SetRules(s.mark, s.rules...); err != nil {
		// rulesfile validated them: this is a bug.
		s.log.printf("stalefuzz: unable to put the rules in force: %v", err)
	}
	s.log.printf("stalefuzz: mark set at %s (by %s): %d rule(s) in force, their windows relative to it", s.mark.Format(time.RFC3339Nano), by, len(s.rules))
	return s.mark, len(s.rules)
}

// reload re-reads the rules file and, once the mark is set, puts its rules
// in force under the same mark. A file with errors changes nothing.
func (s *session) reload(by string) (string, error) {
	rules, err := rulesfile.Read(s.o.rules)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.log.printf("stalefuzz: reload (by %s) failed; the old rules stay in force:\n%v", by, err)
		return "", err
	}
	s.rules = rules
	s.describeRules("reloaded (by "+by+")", rules)
	var msg string
	if s.mark.IsZero() {
		msg = fmt.Sprintf("reloaded %d rule(s) from %s; none in force until the mark", len(rules), s.o.rules)
	} else {
		if err := s.px.SetRules(s.mark, rules...); err != nil {
			s.log.printf("stalefuzz: unable to put the rules in force: %v", err)
			return "", err
		}
		msg = fmt.Sprintf("reloaded %d rule(s) from %s; in force under the mark of %s (After counts, and what Break, Freeze and Cut did, start over)",
			len(rules), s.o.rules, s.mark.Format(time.RFC3339Nano))
	}
	s.log.printf("stalefuzz: %s", msg)
	return msg, nil
}

// checkWritable fails when a file cannot be created beside path.
func checkWritable(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// writeFile writes path atomically with mode perm.
func writeFile(path string, b []byte, perm os.FileMode) error {
	return writeAtomic(path, perm, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// lineWriter serializes messages from many goroutines onto one stream, one
// line (or block of lines) at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, strings.TrimSuffix(format, "\n")+"\n", args...)
}
