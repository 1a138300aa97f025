package fuzz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Exec is one execution: a fresh namespace, the schedule, and what the
// scenario's Start and Drive need.
type Exec struct {
	// Namespace is fresh for this execution.
	Namespace string
	// Schedule is the decoded input.
	Schedule Schedule
	// Direct is a client straight to the apiserver: never stale, never in
	// the trace. Use it to drive the workload and to read final state.
	Direct client.Client
	// Value is the scenario's own state for this execution: what its Start
	// prepares for Drive and its checks. The engine never reads it.
	Value any

	env  *Env
	dir  string
	mark time.Time
	ctx  context.Context

	mu          sync.Mutex
	wg          sync.WaitGroup
	errs        []error
	procs       []*process
	files       []*os.File // copies of the commands' files, for restarts
	timers      []*time.Timer
	timersDue   int                     // After callbacks not yet run to their end
	timerDone   time.Time               // when the last After callback ended
	controllers map[string]*controller  // by proxy client name
	probes      map[string]IdleProbe    // by proxy client name (Idle)
	started     map[string]trace.Cursor // where each client's latest start begins in the trace
	restarts    []Restart
	restarted   map[int]bool // restart steps done
	logs        execLog      // what the controllers logged (Result.Logs)
	restarting  int          // restarts under way
	lagUntil    time.Time    // a restart's lagging apiserver catches up then
	settled     bool
	lagOver     time.Time // when the lag was over; zero if it never was
	settleEnd   time.Time // when settling ended: settled, or its budget ran out
	// notCurrent are the Scenario.AwaitCurrent objects still not Current
	// when the settle budget ran out on a run that was otherwise settled
	// (Result.NotCurrent).
	notCurrent []string
	// directWrites are the workload's writes through Direct, for settling
	// (inFlight).
	directWrites []directWrite
	// crashes are the controller processes that exited on their own (the
	// crash oracle).
	crashes []crash
	// diverged are the distinct reasons the workload went on without what
	// it waited for (Diverged), in the order given; empty while it runs as
	// written.
	diverged []string
}

// crash is a controller process that exited on its own during the
// execution.
type crash struct {
	client string
	at     time.Time
	err    error
}

type directWrite struct {
	obj trace.Object
	rv  uint64
	// fields are the written object's values at Scenario.LostUpdates'
	// paths, as the trace records a controller's (proxy.FieldValues).
	fields map[string]string
	// set is what the write's body set (proxy.BodyValues), with
	// Scenario.LostUpdatesAnyField.
	set map[string]string
	at  time.Time // when it was answered
}

func (x *Exec) wroteDirect(obj trace.Object, rv uint64, fields, set map[string]string) {
	x.mu.Lock()
	x.directWrites = append(x.directWrites, directWrite{obj, rv, fields, set, time.Now()})
	x.mu.Unlock()
}

// controller is one restartable controller of the execution, running as one
// proxy client.
type controller struct {
	stop  func() error                    // ends this instance; returns once it is gone
	start func(ctx context.Context) error // starts a fresh one (which registers itself)
}

// Restart is one controller restart an execution made.
type Restart struct {
	Client string
	// Step is the schedule step that asked for it; -1 for Exec.Restart
	// called by the scenario.
	Step int
	// Fired is when the write it follows was answered (or withheld), Stopped
	// when the old instance was gone, Ready when the new one had synced.
	Fired, Stopped, Ready time.Time
	// Lag is how far behind the apiserver it reconnected to was.
	Lag time.Duration
}

// Knob returns the fuzzer's choice for a declared knob. Asking for a knob the
// scenario does not declare is a mistake in the scenario: it returns 0 and
// makes the execution a harness error that names the knob.
func (x *Exec) Knob(name string) int {
	v, ok := x.Schedule.Knobs[name]
	if !ok && !slices.ContainsFunc(x.env.s.Knobs, func(k Knob) bool { return k.Name == name }) {
		x.fail(fmt.Errorf("Exec.Knob(%q): scenario %s declares no such knob (Scenario.Knobs: %s)", name, x.env.s.Name, names(x.env.s.Knobs)))
	}
	return v
}

// Config returns a rest.Config whose traffic is the named client's.
func (x *Exec) Config(clientName string) (*rest.Config, error) {
	c, err := x.env.proxy.Client(clientName)
	if err != nil {
		return nil, err
	}
	return c.Config(), nil
}

// Kubeconfig writes a kubeconfig for the named client, for an out-of-process
// controller, and returns its path (inside the execution's own directory).
func (x *Exec) Kubeconfig(clientName string) (string, error) {
	c, err := x.env.proxy.Client(clientName)
	if err != nil {
		return "", err
	}
	path := filepath.Join(x.dir, clientName+".kubeconfig")
	return path, c.WriteKubeconfig(path)
}

// DirectConfig returns an admin rest.Config straight to the apiserver, as
// Direct's: for clients Direct does not provide (a watch, a clientset).
func (x *Exec) DirectConfig() *rest.Config { return rest.CopyConfig(x.env.cp.Config) }

// WaitForVersion waits until the named client has seen resourceVersion rv
// of obj, or a newer one, as package trace defines what a client has seen
// (trace.Views: a watch event of obj released to it, its GET of obj, or its
// LIST of obj's resource in obj's namespace or across namespaces). It is how
// a scenario waits until a controller can have seen a write, without copying
// the trace on every poll: each poll reads only what the trace recorded
// since the last one.
func (x *Exec) WaitForVersion(ctx context.Context, clientName string, obj trace.Object, rv string) error {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return fmt.Errorf("unable to wait for %s to see %s at resourceVersion %q: not a resourceVersion this apiserver issues: %w", clientName, obj, rv, err)
	}
	var cur, rcur trace.Cursor // the trace starts with the execution
	shows := func(o trace.Object, got uint64, ok bool) bool { return ok && got >= want && o.Covers(obj) }
	err = wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		if err := x.err(); err != nil {
			return false, err
		}
		var tr trace.Trace
		var released []trace.Event
		released, rcur = x.env.proxy.Trace().NextReleased(rcur)
		tr, cur = x.env.proxy.Trace().Next(cur)
		for i := range released {
			if released[i].Client == clientName && shows(released[i].Shown()) {
				return true, nil
			}
		}
		for i := range tr.Requests {
			if tr.Requests[i].Client == clientName && shows(tr.Requests[i].Shown()) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s never saw %s at resourceVersion %s or later: %w", clientName, obj, rv, err)
	}
	return nil
}

// Settled says, to a scenario's checks, whether the run settled: the lag was
// over and no client wrote for the quiet period. A check of end state
// (convergence) judges only a settled run; a safety check judges any.
func (x *Exec) Settled() bool { return x.settled }

// Diverged tells the engine that the workload went on without what it
// paced itself on (a wait that gave up: a promote sent before the pause it
// was meant for), so that the execution's workflow may no longer be the one
// the no-fault reference runs ran. why names the wait, as a person reads
// it, and is the same for the same wait in every run (no times, no
// namespace): runs are compared by it. The end state (Scenario.EndStates)
// is judged only when the waits that gave up in this execution are those
// that gave up in both no-fault reference runs of its knob settings (a wait
// that times out by design, every run, is the workflow); otherwise it is
// shown and not judged (Result.Diverged). Every other oracle judges the
// execution as before. Repeated calls with one why count once.
func (x *Exec) Diverged(why string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !slices.Contains(x.diverged, why) {
		x.diverged = append(x.diverged, why)
	}
}

// Fixture is what Scenario.Setup returned for this process.
func (x *Exec) Fixture() any { return x.env.fixture }

// WaitForWatch waits until the named client's watch of resource has synced
// since the client's latest start (or restart): the WatchList bookmark
// k8s.io/initial-events-end was released to it, or, when it lists instead
// (no WatchList, or WatchList refused), its LIST was answered. It is the
// moment an out-of-process controller's cache has synced, seen from the
// proxy. It reads only the trace recorded since its last poll.
func (x *Exec) WaitForWatch(ctx context.Context, clientName, resource string) error {
	x.mu.Lock()
	cur := x.started[clientName]
	x.mu.Unlock()
	rcur := cur
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		if err := x.err(); err != nil {
			return false, err // a controller already died
		}
		if c, ok := x.crashed(clientName); ok {
			if !x.mark.IsZero() {
				// A restart the schedule asked for, and the new instance
				// crashed while it synced (on what its stale list showed,
				// say): the crash oracle's finding, not a controller that
				// cannot start.
				return true, nil
			}
			return false, harness("%s exited before its %s watch synced: %v%s", clientName, resource, c.err, lastLines(x.logs.logs(), clientName, 10))
		}
		var tr trace.Trace
		var released []trace.Event
		released, rcur = x.env.proxy.Trace().NextReleased(rcur)
		tr, cur = x.env.proxy.Trace().Next(cur)
		for _, ev := range released {
			if ev.Client == clientName && ev.Resource == resource && ev.InitialEnd {
				return true, nil
			}
		}
		for _, r := range tr.Requests {
			if r.Client == clientName && r.Resource == resource && r.Verb == "list" && r.Code == 200 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s never synced its %s watch: %w", clientName, resource, err)
	}
	return nil
}

// crashed returns the crash of the named client's latest start, if it
// exited on its own since then.
func (x *Exec) crashed(clientName string) (crash, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range slices.Backward(x.crashes) {
		if c.client == clientName {
			return c, true
		}
	}
	return crash{}, false
}

// Restart stops the controller running as the named client and starts a
// fresh one in its place: an in-process manager is stopped and started again
// with fresh caches, an out-of-process controller is SIGKILLed and executed
// again with the same arguments, environment and kubeconfig. It returns once
// the new instance has synced (StartManager's and WaitForWatch's meaning). A
// client that a proxy Freeze or Cut stopped is thawed once the old instance
// is gone, never before.
func (x *Exec) Restart(ctx context.Context, clientName string) error {
	_, err := x.restart(ctx, clientName, nil)
	return err
}

// restart is Restart with a hook run between the old instance's end and the
// new one's start; it returns when the old one was gone.
func (x *Exec) restart(ctx context.Context, clientName string, between func()) (stopped time.Time, err error) {
	x.mu.Lock()
	c := x.controllers[clientName]
	x.mu.Unlock()
	if c == nil {
		return stopped, fmt.Errorf("unable to restart %q: no controller runs as that client (start it with StartManager or Command, named for its proxy client)", clientName)
	}
	if err := c.stop(); err != nil {
		return stopped, fmt.Errorf("unable to stop %s for its restart: %w", clientName, err)
	}
	stopped = time.Now()
	// The new instance has seen nothing the old one was shown.
	x.env.proxy.Trace().AddRestart(trace.Restart{Client: clientName, At: stopped})
	x.env.proxy.Thaw(clientName)
	if between != nil {
		between()
	}
	if err := c.start(ctx); err != nil {
		return stopped, fmt.Errorf("unable to start %s again: %w", clientName, err)
	}
	return stopped, nil
}

// register records a freshly started controller instance and where its part
// of the trace begins.
func (x *Exec) register(clientName string, c *controller, since trace.Cursor) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.controllers == nil {
		x.controllers, x.started = map[string]*controller{}, map[string]trace.Cursor{}
	}
	x.controllers[clientName], x.started[clientName] = c, since
}

// Dir is a directory private to this execution, removed after it.
func (x *Exec) Dir() string { return x.dir }

// Mark is t=0 of the schedule's lag windows.
func (x *Exec) Mark() time.Time { return x.mark }

// Go runs fn until the execution ends; fn must return soon after ctx is done.
// A non-nil error other than context cancellation is a harness error.
func (x *Exec) Go(name string, fn func(ctx context.Context) error) {
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		if err := fn(x.ctx); err != nil && x.ctx.Err() == nil {
			x.fail(fmt.Errorf("%s: %w", name, err))
		}
	}()
}

// After runs fn at mark+d (a user action the scenario times with a knob), as
// part of the execution.
func (x *Exec) After(d time.Duration, name string, fn func(ctx context.Context) error) {
	x.wg.Add(1)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.timersDue++
	x.timers = append(x.timers, time.AfterFunc(time.Until(x.mark.Add(d)), func() {
		defer x.wg.Done()
		defer func() {
			x.mu.Lock()
			x.timersDue--
			x.timerDone = time.Now()
			x.mu.Unlock()
		}()
		if x.ctx.Err() != nil {
			return
		}
		if err := fn(x.ctx); err != nil && x.ctx.Err() == nil {
			x.fail(fmt.Errorf("%s at t+%v: %w", name, d, err))
		}
	}))
}

// Command starts a child process that the execution owns: it runs in its own
// process group, which is killed when the execution ends, and, as the control
// plane's, it cannot outlive this process however it dies (package
// proxy/reaper: SIGKILL to its whole process group by a reaper process, and
// on Linux by Pdeathsig too). name is the proxy client it runs as: a restart
// of that client SIGKILLs it and executes it again as cmd was given: the
// same path, arguments, environment, directory, standard input, output and
// error, extra files and process attributes. Command keeps its own copies of
// cmd's files (the caller may close its own once Command returns), and
// rewinds the input files to where they were for each restart; a Stdin that
// is not an *os.File (a reader a first run would drain) is refused: give a
// file, or nil. Its exit before the execution ends, other than by a restart,
// is a harness error. A nil Stdout or Stderr is set to the execution's log
// (Result.Logs), each line as name's; one the caller set is left as it is.
// A zero WaitDelay is set to a second: how long the execution waits, once
// the child is gone, for the output pipe a process it left behind holds.
func (x *Exec) Command(name string, cmd *exec.Cmd) error {
	if cmd.Stdout == nil {
		cmd.Stdout = &lineWriter{log: &x.logs, client: name}
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &lineWriter{log: &x.logs, client: name}
	}
	sp, err := x.specOf(name, cmd)
	if err != nil {
		return err
	}
	return x.command(name, sp, cmd)
}

// command starts cmd (the caller's, or a restart's made from sp) as client
// name, and registers how to restart it.
func (x *Exec) command(name string, sp *spec, cmd *exec.Cmd) error {
	since := x.env.proxy.Trace().Cursor()
	p, err := x.startProcess(name, cmd)
	if err != nil {
		return err
	}
	x.register(name, &controller{
		stop: p.kill,
		start: func(ctx context.Context) error {
			watched := x.watchedSince(name, since)
			if err := x.command(name, sp, sp.cmd()); err != nil {
				return err
			}
			for _, res := range watched {
				if err := x.WaitForWatch(ctx, name, res); err != nil {
					return err
				}
			}
			return nil
		},
	}, since)
	return nil
}

// spec is what executing a command again needs, taken from the caller's
// exec.Cmd before the reaper rewrites it (package reaper starts it through
// a shell that records its PID), with the execution's own copies of its
// files, closed when the execution ends.
type spec struct {
	path           string
	args, env      []string
	dir            string
	stdin          io.Reader
	stdout, stderr io.Writer
	extra          []*os.File
	attr           *syscall.SysProcAttr
	// offsets are where the input files (stdin and the extra files) were
	// read to when Command was called: a copy shares its offset with the
	// instance before, which may have read on, so a restart rewinds it.
	offsets map[*os.File]int64
}

// specOf copies cmd, duplicating its files.
func (x *Exec) specOf(name string, cmd *exec.Cmd) (*spec, error) {
	sp := &spec{path: cmd.Path, args: slices.Clone(cmd.Args), env: slices.Clone(cmd.Env), dir: cmd.Dir, stdout: cmd.Stdout, stderr: cmd.Stderr,
		offsets: map[*os.File]int64{}}
	if cmd.SysProcAttr != nil {
		attr := *cmd.SysProcAttr
		sp.attr = &attr
	}
	keep := func(f *os.File) (*os.File, error) {
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			return nil, fmt.Errorf("unable to keep %s of %s for its restarts: %w", f.Name(), name, err)
		}
		dup := os.NewFile(uintptr(fd), f.Name())
		if off, err := dup.Seek(0, io.SeekCurrent); err == nil {
			sp.offsets[dup] = off // a pipe or a terminal has none
		}
		x.mu.Lock()
		x.files = append(x.files, dup)
		x.mu.Unlock()
		return dup, nil
	}
	var err error
	switch in := cmd.Stdin.(type) {
	case nil:
	case *os.File:
		if sp.stdin, err = keep(in); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unable to run %s: its Stdin is a %T, which its first run would drain before a restart: give an *os.File (or nil)", name, cmd.Stdin)
	}
	for _, w := range []*io.Writer{&sp.stdout, &sp.stderr} {
		if f, ok := (*w).(*os.File); ok {
			if *w, err = keep(f); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range cmd.ExtraFiles {
		var dup *os.File
		if f != nil {
			if dup, err = keep(f); err != nil {
				return nil, err
			}
		}
		sp.extra = append(sp.extra, dup)
	}
	return sp, nil
}

// cmd is a fresh exec.Cmd as the caller's was, its input files rewound to
// where they were then.
func (sp *spec) cmd() *exec.Cmd {
	for _, f := range append([]*os.File{asFile(sp.stdin)}, sp.extra...) {
		if off, ok := sp.offsets[f]; ok && f != nil {
			_, _ = f.Seek(off, io.SeekStart)
		}
	}
	c := &exec.Cmd{Path: sp.path, Args: slices.Clone(sp.args), Env: slices.Clone(sp.env), Dir: sp.dir,
		Stdin: sp.stdin, Stdout: sp.stdout, Stderr: sp.stderr, ExtraFiles: slices.Clone(sp.extra)}
	if sp.attr != nil {
		attr := *sp.attr
		c.SysProcAttr = &attr
	}
	return c
}

func asFile(r io.Reader) *os.File {
	f, _ := r.(*os.File)
	return f
}

// process is one child process of the execution.
type process struct {
	name      string
	cmd       *exec.Cmd
	restarted atomic.Bool
	exited    chan struct{}
}

func (x *Exec) startProcess(name string, cmd *exec.Cmd) (*process, error) {
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	if cmd.WaitDelay == 0 {
		// Output to a writer (the execution's log) is copied from a pipe,
		// which a process that left the group could hold open: Wait then
		// waits this long for it, no longer.
		cmd.WaitDelay = time.Second
	}
	if err := x.env.reaper.Start(cmd); err != nil {
		return nil, fmt.Errorf("unable to start %s: %w", name, err)
	}
	x.mu.Lock()
	x.procs = append(x.procs, p)
	x.mu.Unlock()
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		defer close(p.exited)
		err := cmd.Wait()
		x.env.reaper.Forget(cmd.Process.Pid)
		for _, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
			if lw, ok := w.(*lineWriter); ok {
				lw.flush() // a last line without its newline
			}
		}
		if x.ctx.Err() == nil && !p.restarted.Load() {
			// Not killed by the harness: a crash (the crash oracle), or,
			// before its watches synced, a harness error (WaitForWatch).
			x.mu.Lock()
			x.crashes = append(x.crashes, crash{client: name, at: time.Now(), err: err})
			x.mu.Unlock()
		}
	}()
	return p, nil
}

// kill ends the process for a restart and waits until it is gone.
func (p *process) kill() error {
	p.restarted.Store(true)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(RestartBudget):
		return fmt.Errorf("%s (pid %d) still running %v after SIGKILL", p.name, p.cmd.Process.Pid, RestartBudget)
	}
}

// watchedSince lists the resources the client watched (successfully) since
// cur.
func (x *Exec) watchedSince(clientName string, cur trace.Cursor) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range x.env.proxy.Trace().Since(cur).Requests {
		if r.Client == clientName && r.Verb == "watch" && r.Code == 200 && !seen[r.Resource] {
			seen[r.Resource] = true
			out = append(out, r.Resource)
		}
	}
	return out
}

func (x *Exec) err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return errors.Join(x.errs...)
}

func (x *Exec) fail(err error) {
	x.mu.Lock()
	x.errs = append(x.errs, err)
	x.mu.Unlock()
}

// StartManager runs a controller-runtime manager as the named client, with its
// cache scoped to the execution's namespace and those of Scenario.Scopes
// (cluster-scoped objects are cached whole), no leader election, no metrics
// or health endpoints. setup registers the scenario's reconcilers;
// StartManager returns once a controller's workers run (its sources have
// synced), so that the workload and the lag windows meet a running
// controller.
//
// The manager's cache is controller-runtime's own, except that its waits for
// sync are told the moment the informers and handlers have synced (client-go's
// DoneCheckers) rather than polling every 100 ms: controller-runtime polls
// three times in a row before it starts workers, which rounded every start
// (and every restart a fault asks for) up by 200 ms. What the controller
// lists, watches, reads and writes is unchanged.
//
// What the manager and its controllers log (controller-runtime's lines, a
// reconciler's errors, what a reconciler logs through its context's logger)
// at V(0) is kept in the execution's log as clientName's (Result.Logs).
//
// Each of opts may change the manager's options before it is created (its
// client's cache options, say: controller-runtime's
// EnableReadYourWritesConsistency); a restart applies them again.
func (x *Exec) StartManager(ctx context.Context, clientName string, setup func(manager.Manager) error, opts ...func(*manager.Options)) error {
	cfg, err := x.Config(clientName)
	if err != nil {
		return err
	}
	since := x.env.proxy.Trace().Cursor()
	started := &workerStarts{n: new(atomic.Int32)}
	options := manager.Options{
		Scheme:                  x.env.scheme,
		Cache:                   cache.Options{DefaultNamespaces: x.env.cachedNamespaces(x.Namespace)},
		NewCache:                newSyncWaitCache,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          false,
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                  logr.New(&managerLog{starts: started, log: &x.logs, client: clientName}),
		GracefulShutdownTimeout: ptr.To(RestartBudget / 2),
	}
	for _, o := range opts {
		o(&options)
	}
	mgr, err := manager.New(cfg, options)
	if err != nil {
		return fmt.Errorf("unable to create manager for %s: %w", clientName, err)
	}
	if err := setup(mgr); err != nil {
		return fmt.Errorf("unable to set up manager for %s: %w", clientName, err)
	}
	mctx, cancel := context.WithCancel(x.ctx)
	done := make(chan struct{})
	x.Go("manager "+clientName, func(context.Context) error {
		defer close(done)
		return mgr.Start(mctx)
	})
	x.register(clientName, &controller{
		stop: func() error {
			cancel()
			select {
			case <-done:
				return nil
			case <-time.After(RestartBudget):
				return fmt.Errorf("manager %s still running %v after it was stopped", clientName, RestartBudget)
			}
		},
		start: func(ctx context.Context) error { return x.StartManager(ctx, clientName, setup, opts...) },
	}, since)
	// A controller starts its workers only after its sources synced, and
	// says so in its log: that is the moment it reacts to the workload.
	err = wait.PollUntilContextCancel(ctx, 2*time.Millisecond, true, func(context.Context) (bool, error) {
		return started.n.Load() > 0, nil
	})
	if err != nil {
		return fmt.Errorf("controllers of %s did not start their workers: %w", clientName, err)
	}
	return nil
}

// workerStarts is a log sink that counts controller-runtime's "Starting
// workers" messages and discards everything else (managerLog tees it into
// the execution's log).
type workerStarts struct{ n *atomic.Int32 }

func (w *workerStarts) Init(logr.RuntimeInfo)  {}
func (w *workerStarts) Enabled(level int) bool { return level == 0 }
func (w *workerStarts) Info(_ int, msg string, _ ...any) {
	if msg == "Starting workers" {
		w.n.Add(1)
	}
}
func (w *workerStarts) Error(error, string, ...any)    {}
func (w *workerStarts) WithValues(...any) logr.LogSink { return w }
func (w *workerStarts) WithName(string) logr.LogSink   { return w }
