package fluxcd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/gitserver"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// Version is the source-controller release under test (hack/versions.sh).
const Version = "v1.9.3"

// Client is the proxy client source-controller runs as.
const Client = "source-controller"

// Object is the GitRepository every execution creates.
const Object = "podinfo"

// GVK is GitRepository's.
var GVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}

// Retry delays given to source-controller (defaults 750ms and 15m). They only
// set its workqueue rate limiter, the backoff before a failed reconcile runs
// again; the patch helper's own conflict retries (5 attempts, 100–200 ms
// apart, fluxcd/pkg runtime/patch), the reconcile logic and
// ComputeReconcileResult are untouched. MaxRetryDelay bounds how long after
// the lag ends a failed reconcile is retried, so it bounds convergence.
const (
	MinRetryDelay = 100 * time.Millisecond
	MaxRetryDelay = 1 * time.Second
)

// bounds allow about 3 s of lag, as the claim has it, within the 8 s budget.
var bounds = fuzz.Bounds{MaxStart: time.Second, MaxLength: 3200 * time.Millisecond, MaxLagEnd: 3500 * time.Millisecond, MaxDelay: 300 * time.Millisecond}

// RealisticBounds leave room, within the 8 s budget, for one relist (client-go
// waits up to 1.6 s before it relists) or one source-controller restart: up
// to 2.1 s of lag, and lagging apiservers up to 0.3 s behind. Faults anchor to
// the Nth event or write, and a clean reconcile writes within 0.3 s.
var RealisticBounds = fuzz.Bounds{MaxStart: time.Second, MaxLength: 2100 * time.Millisecond, MaxLagEnd: 2100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}

// Module is source-controller's main package at Version, as target.yaml's
// controller names it.
const Module = "github.com/fluxcd/source-controller@" + Version

// Binary returns the source-controller binary: $STALEFUZZ_SOURCE_CONTROLLER,
// else the one `make source-controller` (stalefuzz prepare on target.yaml)
// built into the target binary cache, which target.yaml runs too.
func Binary() string {
	if b := os.Getenv("STALEFUZZ_SOURCE_CONTROLLER"); b != "" {
		return b
	}
	return target.BinaryPath(Module)
}

// CRDs is the directory of source-controller's CRDs in its module at
// Version (config/crd/bases), downloaded into the module cache if needed.
func CRDs() string {
	dir, err := target.ModuleDir(context.Background(), Module)
	if err != nil {
		// NewEnv refuses the missing path, naming it.
		return filepath.Join("(module "+Module+" not downloaded: "+err.Error()+")", "config", "crd", "bases")
	}
	return filepath.Join(dir, "config", "crd", "bases")
}

// fixture is what every execution of a process shares.
type fixture struct {
	git *gitserver.Server
	url string
}

// Scenario is source-controller reconciling one GitRepository against a local
// git server, with lag on its GitRepository watch. space chooses lag only or
// lag and loss.
func Scenario(space fuzz.Space) fuzz.Scenario {
	name, knownBug, b, seeds := "fluxcd-lag", "", bounds, Seeds(bounds)
	switch space {
	case fuzz.LagAndLoss:
		// Losing a watch event for good (no relist) leaves source-controller's
		// cache stale forever: its own later writes are no-ops and cause no
		// event that would correct it. See README.md.
		name, knownBug = "fluxcd-loss", "a watch event lost without relist leaves the GitRepository stuck"
	case fuzz.AnchoredLoss:
		// The loss space with each step anchored to the Nth MODIFIED event:
		// its seeds come from the reference run (fuzz.MaxReferenceSeeds).
		name, knownBug, seeds = "fluxcd-anchored-loss", "a watch event lost without relist leaves the GitRepository stuck", nil
	case fuzz.Realistic, fuzz.RealisticLatency:
		name, b, seeds = "fluxcd-realistic", RealisticBounds, RealisticSeeds()
	}
	s := scenario(MinRetryDelay, MaxRetryDelay)
	s.Name, s.Space, s.Bounds, s.KnownBug, s.Seeds = name, space, b, knownBug, seeds
	// The seeds are where campaigns start. In a plain go test run they would
	// repeat the specs' schedules at about 4 s each (the claim table holds
	// the lag ones, the truth table the realistic ones); the committed corpus
	// entries stay regression rows.
	s.SeedsOnlyFuzzing = true
	return s
}

// DefaultRetryScenario is the lag-only scenario with source-controller's
// default retry delays (--min-retry-delay=750ms --max-retry-delay=15m), for
// specs that measure how long a user of the defaults waits: its backoff
// outgrows an execution's budget, so such specs run with fuzz.Within.
func DefaultRetryScenario() fuzz.Scenario {
	s := scenario(750*time.Millisecond, 15*time.Minute)
	s.Name, s.Space, s.Bounds, s.Seeds = "fluxcd-default-retry", fuzz.LagOnly, bounds, nil
	return s
}

func scenario(minRetry, maxRetry time.Duration) fuzz.Scenario {
	bin := Binary()
	return fuzz.Scenario{
		CRDPaths:  []string{CRDs()},
		Clients:   []string{Client},
		Resources: []string{"gitrepositories"},
		Fields:    []string{"status.conditions", "reason"},
		// Settled means no write for longer than the longest retry backoff:
		// a source-controller that keeps retrying never counts as settled.
		// Its metrics (fuzz.ReconcileMetrics) settle a run sooner when its
		// last reconcile succeeded.
		Quiet: min(maxRetry, MaxRetryDelay) + 500*time.Millisecond,
		Setup: setup,
		Start: func(ctx context.Context, x *fuzz.Exec) error {
			return start(ctx, x, bin, minRetry, maxRetry)
		},
		// Knob "edit": 0 = no edit; k = the user edits spec.interval at
		// t+k×EditStep, bumping metadata.generation while source-controller
		// may be behind.
		Knobs: []fuzz.Knob{{Name: "edit", Values: EditValues}},
		Drive: func(ctx context.Context, x *fuzz.Exec) error {
			if err := x.Direct.Create(ctx, gitRepository(x.Namespace, x.Fixture().(*fixture).url)); err != nil {
				return err
			}
			if k := x.Knob("edit"); k > 0 {
				x.After(time.Duration(k)*EditStep, "edit spec.interval", func(ctx context.Context) error {
					return editInterval(ctx, x)
				})
			}
			return nil
		},
		Converge: &fuzz.Convergence{GVK: GVK},
		Checks: []fuzz.Check{
			{Name: "artifact", Fn: artifactPresent},
			{Name: "claimed-state", Fn: claimedState},
		},
		Features: features,
	}
}

// RealisticSeeds restart source-controller right after its 1st, 2nd and 6th
// write and relist its watch at the first MODIFIED, and with the user's edit
// at t+0.5 s, relist at the edit's own event: the places the truth table
// says matter, for the mutator to start from.
func RealisticSeeds() []fuzz.Schedule {
	step := func(edit int, st fuzz.Step) fuzz.Schedule {
		st.Client, st.Length = Client, RealisticBounds.MaxLength
		return fuzz.Schedule{Knobs: map[string]int{"edit": edit}, Steps: []fuzz.Step{st}}
	}
	return []fuzz.Schedule{
		step(0, fuzz.Step{Action: proxy.Freeze}),
		step(0, fuzz.Step{Action: proxy.Freeze, After: 1}),
		step(0, fuzz.Step{Action: proxy.Cut, After: 5}),
		step(0, fuzz.Step{Resource: "gitrepositories", Types: []string{"MODIFIED"}, Action: proxy.Expire}),
		step(1, fuzz.Step{Resource: "gitrepositories", Types: []string{"MODIFIED"}, Action: proxy.Expire, After: 5}),
	}
}

// Seeds are the claim's own pattern, ≈3 s of held GitRepository events for
// source-controller, placed where the write sequence says it matters: from the
// start, around the first status writes, around the later ones, and around the
// second reconcile that a user's edit at t+0.5 s starts. Every campaign runs
// them first and mutates from them.
func Seeds(b fuzz.Bounds) []fuzz.Schedule {
	hold := func(edit int, start time.Duration) fuzz.Schedule {
		return fuzz.Schedule{Knobs: map[string]int{"edit": edit}, Steps: []fuzz.Step{{
			Client: Client, Resource: "gitrepositories", Action: proxy.Hold,
			Start: start, Length: min(b.MaxLength, b.MaxLagEnd-start),
		}}}
	}
	return []fuzz.Schedule{hold(0, 0), hold(0, 150*time.Millisecond), hold(0, 300*time.Millisecond), hold(1, EditStep)}
}

func setup(_ context.Context, root string) (any, func() error, error) {
	if _, err := os.Stat(Binary()); err != nil {
		return nil, nil, fmt.Errorf("source-controller %s not found at %s (run `make source-controller`, or set STALEFUZZ_SOURCE_CONTROLLER): %w", Version, Binary(), err)
	}
	if _, err := gitserver.CreateRepository(root, "podinfo", "master", map[string]string{
		"README.md":              "# podinfo fixture for stalefuzz\n",
		"deploy/configmap.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  greeting: hello\n",
		"deploy/kustomization.y": "resources: [configmap.yaml]\n",
	}); err != nil {
		return nil, nil, err
	}
	git, err := gitserver.Start(root)
	if err != nil {
		return nil, nil, err
	}
	return &fixture{git: git, url: git.URL("podinfo")}, git.Stop, nil
}

// start runs source-controller for this execution only: watching the
// execution's namespace, through its own proxy client, with its own storage.
func start(ctx context.Context, x *fuzz.Exec, bin string, minRetry, maxRetry time.Duration) error {
	kubeconfig, err := x.Kubeconfig(Client)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	metrics := "127.0.0.1:" + strconv.Itoa(metricsPort)
	storage := filepath.Join(x.Dir(), "storage")
	if err := os.Mkdir(storage, 0o755); err != nil {
		return fmt.Errorf("unable to create storage directory: %w", err)
	}
	logFile, err := os.Create(filepath.Join(x.Dir(), "source-controller.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--watch-all-namespaces=false",
		"--storage-path="+storage,
		"--storage-addr="+addr, "--storage-adv-addr="+addr,
		"--metrics-addr="+metrics, "--health-addr=0", "--events-addr=",
		"--min-retry-delay="+minRetry.String(), "--max-retry-delay="+maxRetry.String(),
		"--log-level=debug", "--log-encoding=json",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+x.Namespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := x.Command(Client, cmd); err != nil {
		logFile.Close()
		return err
	}
	logFile.Close() // the child has its own descriptor
	// Its reconcile results say when it is done: after a success it
	// requeues only after spec.interval (10 m), after a failure it retries
	// within MaxRetryDelay. The run then settles ProbedQuiet after the last
	// write instead of waiting out the longest backoff.
	x.Idle(Client, fuzz.ReconcileMetrics("http://"+metrics+"/metrics"))
	return x.WaitForWatch(ctx, Client, "gitrepositories")
}

// EditStep spaces the times the "edit" knob can choose, EditValues of them
// (0: no edit).
const (
	EditStep   = 500 * time.Millisecond
	EditValues = 4
)

// editInterval changes spec.interval, as a user would, with a merge patch.
func editInterval(ctx context.Context, x *fuzz.Exec) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(x.Namespace)
	u.SetName(Object)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"interval":"9m"}}`))
	if err := x.Direct.Patch(ctx, u, patch); err != nil {
		return fmt.Errorf("unable to edit gitrepository %s/%s: %w", x.Namespace, Object, err)
	}
	return nil
}

func gitRepository(ns, url string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"url":      url,
			"interval": "10m", // no periodic reconcile within an execution
			"timeout":  "20s",
			"ref":      map[string]any{"branch": "master"},
		},
	}}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(ns)
	u.SetName(Object)
	return u
}

func get(ctx context.Context, x *fuzz.Exec) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	if err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: Object}, u); err != nil {
		return nil, fmt.Errorf("unable to get gitrepository %s/%s: %w", x.Namespace, Object, err)
	}
	return u, nil
}

// artifactPresent: a converged GitRepository must carry its artifact.
func artifactPresent(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
	u, err := get(ctx, x)
	if err != nil {
		return err
	}
	if _, ok, _ := unstructured.NestedMap(u.Object, "status", "artifact"); !ok {
		return fmt.Errorf("gitrepository %s/%s: status.artifact: want an artifact, got none", x.Namespace, Object)
	}
	return nil
}

// claimedState is the state fluxcd/source-controller#2012 claims: a valid
// artifact, but status.observedGeneration not equal to metadata.generation,
// once the run has settled.
func claimedState(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
	u, err := get(ctx, x)
	if err != nil {
		return err
	}
	_, hasArtifact, _ := unstructured.NestedMap(u.Object, "status", "artifact")
	og, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if hasArtifact && (!found || og != u.GetGeneration()) {
		return fmt.Errorf("gitrepository %s/%s: the claimed state: status.artifact is set but status.observedGeneration is %s, want %d",
			x.Namespace, Object, orNone(found, og), u.GetGeneration())
	}
	return nil
}

func orNone(found bool, v int64) string {
	if !found {
		return "unset"
	}
	return strconv.FormatInt(v, 10)
}

// features add, to the engine's, the condition reasons GitRepository passed
// through and the reasons of the Events source-controller recorded.
func features(res *fuzz.Result) []string {
	var fs []string
	for _, r := range res.Trace.Requests {
		if r.Code/100 != 2 {
			continue
		}
		if c, ok := r.Fields["status.conditions"]; ok && r.Resource == "gitrepositories" {
			for _, reason := range reasons(c) {
				fs = append(fs, "condition|"+reason)
			}
		}
		if reason, ok := r.Fields["reason"]; ok && r.Resource == "events" {
			fs = append(fs, "event|"+reason)
		}
	}
	slices.Sort(fs)
	return slices.Compact(fs)
}

// reasons returns "type=status/reason" for each condition of a JSON array.
func reasons(conditions string) []string {
	var cs []struct{ Type, Status, Reason string }
	if json.Unmarshal([]byte(conditions), &cs) != nil {
		return nil
	}
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Type+"="+c.Status+"/"+c.Reason)
	}
	return out
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("unable to find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
