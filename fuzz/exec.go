package fuzz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/resourceversion"
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
	timers      []*time.Timer
	timersDue   int                     // After callbacks not yet run to their end
	timerDone   time.Time               // when the last After callback ended
	controllers map[string]*controller  // by proxy client name
	probes      map[string]IdleProbe    // by proxy client name (Idle)
	started     map[string]trace.Cursor // where each client's latest start begins in the trace
	restarts    []Restart
	restarted   map[int]bool // restart steps done
	restarting  int          // restarts under way
	lagUntil    time.Time    // a restart's lagging apiserver catches up then
	settled     bool
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

// Knob returns the fuzzer's choice for a declared knob.
func (x *Exec) Knob(name string) int { return x.Schedule.Knobs[name] }

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

// WaitForVersion waits until the named client has been sent resourceVersion
// rv (or a newer one) of the object namespace/name of resource: a watch event
// of that object at rv or later was released to it, or a LIST of resource it
// sent was answered at rv or later. It is how a scenario waits until a
// controller can have seen a write, without copying the trace on every poll:
// each poll reads only what the trace recorded since the last one.
func (x *Exec) WaitForVersion(ctx context.Context, clientName, resource, namespace, name, rv string) error {
	var cur, rcur trace.Cursor // the trace starts with the execution
	newer := func(got string) bool {
		c, err := resourceversion.CompareResourceVersion(got, rv)
		return err == nil && c >= 0
	}
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		if err := x.err(); err != nil {
			return false, err
		}
		var tr trace.Trace
		var released []trace.Event
		released, rcur = x.env.proxy.Trace().NextReleased(rcur)
		tr, cur = x.env.proxy.Trace().Next(cur)
		for _, ev := range released {
			if ev.Client == clientName && ev.Resource == resource && ev.Namespace == namespace && ev.Name == name &&
				newer(ev.ResourceVersion) {
				return true, nil
			}
		}
		for _, r := range tr.Requests {
			if r.Client == clientName && r.Resource == resource && r.Verb == "list" && r.Code == 200 &&
				(r.Namespace == "" || r.Namespace == namespace) && newer(r.ReturnedRV) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s was never sent %s %s/%s at resourceVersion %s or later: %w", clientName, resource, namespace, name, rv, err)
	}
	return nil
}

// Settled says, to a scenario's checks, whether the run settled: the lag was
// over and no client wrote for the quiet period. A check of end state
// (convergence) judges only a settled run; a safety check judges any.
func (x *Exec) Settled() bool { return x.settled }

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
// on Linux by Pdeathsig too). name is the proxy client it runs
// as: a restart of that client SIGKILLs it and executes it again with the
// same path, arguments, environment, directory and output files (Command
// keeps its own copies of cmd's output files, so the caller may close its
// own after Command returns). Its exit before the execution ends, other than
// by a restart, is a harness error.
func (x *Exec) Command(name string, cmd *exec.Cmd) error {
	since := x.env.proxy.Trace().Cursor()
	p, err := x.startProcess(name, cmd)
	if err != nil {
		return err
	}
	x.register(name, &controller{
		stop: p.kill,
		start: func(ctx context.Context) error {
			watched := x.watchedSince(name, since)
			again := exec.Command(cmd.Path, cmd.Args[1:]...)
			again.Env, again.Dir = cmd.Env, cmd.Dir
			again.Stdout, again.Stderr = p.stdout, p.stderr
			if err := x.Command(name, again); err != nil {
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

// process is one child process of the execution.
type process struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr io.Writer // the execution's own copies of cmd's output files
	files          []*os.File
	restarted      atomic.Bool
	exited         chan struct{}
}

func (x *Exec) startProcess(name string, cmd *exec.Cmd) (*process, error) {
	p := &process{name: name, cmd: cmd, stdout: cmd.Stdout, stderr: cmd.Stderr, exited: make(chan struct{})}
	// Keep the output files open for a restart, whatever the caller does
	// with its own.
	for _, w := range []*io.Writer{&p.stdout, &p.stderr} {
		if f, ok := (*w).(*os.File); ok {
			fd, err := syscall.Dup(int(f.Fd()))
			if err != nil {
				p.close()
				return nil, fmt.Errorf("unable to keep the output of %s: %w", name, err)
			}
			dup := os.NewFile(uintptr(fd), f.Name())
			p.files = append(p.files, dup)
			*w = dup
		}
	}
	if err := x.env.reaper.Start(cmd); err != nil {
		p.close()
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
		if x.ctx.Err() == nil && !p.restarted.Load() {
			x.fail(fmt.Errorf("%s exited during the execution: %v", name, err))
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

func (p *process) close() {
	for _, f := range p.files {
		_ = f.Close()
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

// stop ends everything the execution started, within budget.
func (x *Exec) stop(budget time.Duration) error {
	x.mu.Lock()
	for _, t := range x.timers {
		if t.Stop() {
			x.wg.Done()
		}
	}
	for _, p := range x.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	x.mu.Unlock()
	done := make(chan struct{})
	go func() { x.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(budget):
		return fmt.Errorf("controllers still running %v after their context ended", budget)
	}
	for _, p := range x.procs {
		p.close()
	}
	return os.RemoveAll(x.dir)
}

// StartManager runs a controller-runtime manager as the named client, with its
// cache scoped to the execution's namespace, no leader election, no metrics
// or health endpoints. setup registers the scenario's reconcilers; StartManager
// returns once a controller's workers run (its sources have synced), so that
// the workload and the lag windows meet a running controller.
//
// The manager's cache is controller-runtime's own, except that its waits for
// sync are told the moment the informers and handlers have synced (client-go's
// DoneCheckers) rather than polling every 100 ms: controller-runtime polls
// three times in a row before it starts workers, which rounded every start
// (and every restart a fault asks for) up by 200 ms. What the controller
// lists, watches, reads and writes is unchanged.
func (x *Exec) StartManager(ctx context.Context, clientName string, setup func(manager.Manager) error) error {
	cfg, err := x.Config(clientName)
	if err != nil {
		return err
	}
	since := x.env.proxy.Trace().Cursor()
	started := &workerStarts{n: new(atomic.Int32)}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                  x.env.scheme,
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{x.Namespace: {}}},
		NewCache:                newSyncWaitCache,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          false,
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                  logr.New(started),
		GracefulShutdownTimeout: ptr.To(RestartBudget / 2),
	})
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
		start: func(ctx context.Context) error { return x.StartManager(ctx, clientName, setup) },
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
// workers" messages and discards everything else.
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
