package fuzz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

	env  *Env
	dir  string
	mark time.Time
	ctx  context.Context

	mu     sync.Mutex
	wg     sync.WaitGroup
	errs   []error
	cmds   []*exec.Cmd
	timers []*time.Timer
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

// Fixture is what Scenario.Setup returned for this process.
func (x *Exec) Fixture() any { return x.env.fixture }

// WaitForWatch waits until the named client's watch of resource has delivered
// its initial events (the WatchList bookmark k8s.io/initial-events-end was
// released to it): the moment an out-of-process controller's cache has
// synced, seen from the proxy.
func (x *Exec) WaitForWatch(ctx context.Context, clientName, resource string) error {
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		if err := x.err(); err != nil {
			return false, err // a controller already died
		}
		for _, ev := range x.env.proxy.Trace().Since(trace.Cursor{}).Events {
			if ev.Client == clientName && ev.Resource == resource && ev.InitialEnd && ev.Fate == trace.Released {
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
	x.timers = append(x.timers, time.AfterFunc(time.Until(x.mark.Add(d)), func() {
		defer x.wg.Done()
		if x.ctx.Err() != nil {
			return
		}
		if err := fn(x.ctx); err != nil && x.ctx.Err() == nil {
			x.fail(fmt.Errorf("%s at t+%v: %w", name, d, err))
		}
	}))
}

// Command starts a child process that the execution owns: it runs in its own
// process group, which is killed when the execution ends, and it gets SIGKILL
// if this process dies first (Pdeathsig).
func (x *Exec) Command(name string, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("unable to start %s: %w", name, err)
	}
	x.mu.Lock()
	x.cmds = append(x.cmds, cmd)
	x.mu.Unlock()
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		err := cmd.Wait()
		if x.ctx.Err() == nil {
			x.fail(fmt.Errorf("%s exited during the execution: %v", name, err))
		}
	}()
	return nil
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
	for _, c := range x.cmds {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	x.mu.Unlock()
	done := make(chan struct{})
	go func() { x.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(budget):
		return fmt.Errorf("controllers still running %v after their context ended", budget)
	}
	return os.RemoveAll(x.dir)
}

// StartManager runs a controller-runtime manager as the named client, with its
// cache scoped to the execution's namespace, no leader election, no metrics
// or health endpoints. setup registers the scenario's reconcilers; StartManager
// returns once a controller's workers run (its sources have synced), so that
// the workload and the lag windows meet a running controller.
func (x *Exec) StartManager(ctx context.Context, clientName string, setup func(manager.Manager) error) error {
	cfg, err := x.Config(clientName)
	if err != nil {
		return err
	}
	started := &workerStarts{n: new(atomic.Int32)}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 x.env.scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{x.Namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 logr.New(started),
	})
	if err != nil {
		return fmt.Errorf("unable to create manager for %s: %w", clientName, err)
	}
	if err := setup(mgr); err != nil {
		return fmt.Errorf("unable to set up manager for %s: %w", clientName, err)
	}
	x.Go("manager "+clientName, mgr.Start)
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
