package contention

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

//go:embed rollouts.crd.yaml
var crdYAML []byte

// Replica names the proxy client of replica i.
func Replica(i int) string { return "replica-" + strconv.Itoa(i) }

// Object is the name of the Rollout every execution creates.
const Object = "rollout"

// Steps is the plan length every execution asks for.
const Steps = 3

// PlanID is the field the invariant is about.
const PlanID = "status.plan.id"

// Scenario returns the contention scenario with the given status write.
// Knob "replicas" runs 1 or 2 replicas (value 0 or 1), each a manager with
// its own proxy client and no leader election.
func Scenario(w Write) fuzz.Scenario {
	var crd apiextensionsv1.CustomResourceDefinition
	scheme := runtime.NewScheme()
	err := errors.Join(yaml.UnmarshalStrict(crdYAML, &crd), clientgoscheme.AddToScheme(scheme), AddToScheme(scheme))
	return fuzz.Scenario{
		Name:      "contention-" + w.String(),
		CRDs:      []*apiextensionsv1.CustomResourceDefinition{&crd},
		Scheme:    scheme,
		Clients:   []string{Replica(0), Replica(1)},
		Resources: []string{"rollouts"},
		Knobs:     []fuzz.Knob{{Name: "replicas", Values: 2}},
		Start: func(ctx context.Context, x *fuzz.Exec) error {
			if err != nil {
				return fmt.Errorf("contention scenario: %w", err)
			}
			var g errgroup.Group // replicas start side by side, as in a real rollout
			for i := range x.Knob("replicas") + 1 {
				g.Go(func() error {
					r := &Reconciler{Write: w}
					return x.StartManager(ctx, Replica(i), func(mgr manager.Manager) error {
						r.Client = mgr.GetClient()
						return r.SetupWithManager(ctx, mgr)
					}, w.managerOptions)
				})
			}
			return g.Wait()
		},
		Drive: func(ctx context.Context, x *fuzz.Exec) error {
			return x.Direct.Create(ctx, &Rollout{
				ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: Object},
				Spec:       RolloutSpec{Steps: Steps},
			})
		},
		Converge:     &fuzz.Convergence{GVK: GroupVersion.WithKind("Rollout")},
		LostUpdates:  []string{PlanID},
		Differential: &fuzz.Differential{GVK: GroupVersion.WithKind("Rollout"), Ignore: []string{PlanID, "status.conditions"}},
		Checks:       []fuzz.Check{{Name: "plan-kept", Fn: planKept}},
		KnownBug:     knownBug(w),
		Quiet:        4 * StepInterval, // a running plan writes every StepInterval
		Features: func(res *fuzz.Result) []string {
			plans := map[string]bool{}
			for _, r := range res.Trace.Requests {
				if id, ok := r.Fields[PlanID]; ok && r.Code/100 == 2 {
					plans[id] = true
				}
			}
			return []string{fmt.Sprintf("plans-acknowledged|%d", len(plans))}
		},
	}
}

// RealisticBounds leave room, within the 8 s budget, for one relist (client-go
// waits up to 1.6 s before it relists) or restart, reconnecting to an
// apiserver up to 0.5 s behind. A plan is written within 0.3 s of the mark.
var RealisticBounds = fuzz.Bounds{MaxStart: 500 * time.Millisecond, MaxLength: 1500 * time.Millisecond, MaxLagEnd: 1500 * time.Millisecond, MaxDelay: 500 * time.Millisecond}

// Realistic is the contention scenario with one replica under faults a real
// cluster produces (fuzz.RealisticLatency): ordinary latency, lag, broken
// watches, relists, and a restart between two writes or before a write's
// answer, optionally reconnecting to a lagging apiserver. (Its committed
// corpus, found in fuzz.Realistic, has no record that space reads
// otherwise.) With one replica there is no
// contention but what the faults make: whatever it finds, a real cluster can
// do.
func Realistic(w Write) fuzz.Scenario {
	s := Scenario(w)
	s.Name = "contention-realistic-" + w.String()
	s.Clients = []string{Replica(0)}
	s.Knobs = []fuzz.Knob{{Name: "replicas", Values: 1}}
	s.Space = fuzz.RealisticLatency
	s.Bounds = RealisticBounds
	if w == Blind {
		s.KnownBug = "a restart that reconnects to a lagging apiserver sees no plan, plans again, and its blind patch replaces the plan"
	}
	// Restarts right after and before the answer to the first writes,
	// reconnecting to a current apiserver: none of them loses a plan (the
	// suite checks 0/10); the mutator has to find a fault that does.
	s.Seeds = []fuzz.Schedule{
		{Knobs: map[string]int{"replicas": 0}, Steps: []fuzz.Step{{Client: Replica(0), Action: proxy.Freeze, Length: RealisticBounds.MaxLength}}},
		{Knobs: map[string]int{"replicas": 0}, Steps: []fuzz.Step{{Client: Replica(0), Action: proxy.Cut, Length: RealisticBounds.MaxLength, After: 1}}},
	}
	return s
}

func knownBug(w Write) string {
	switch w {
	case Blind:
		return "a blind status patch from a stale read replaces the plan"
	case BlindReadYourWrites:
		return "a blind status patch from a restarted replica's stale list replaces the plan: read-your-writes remembers writes in memory only"
	}
	return ""
}

// planKept checks the invariant on the final object: its plan is the first
// plan any replica had acknowledged, and it is complete.
func planKept(ctx context.Context, x *fuzz.Exec, tr trace.Trace) error {
	first := ""
	for _, r := range tr.Requests {
		if id, ok := r.Fields[PlanID]; ok && r.Code/100 == 2 && r.Verb == "patch" {
			first = id
			break
		}
	}
	ro := &Rollout{}
	if err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: Object}, ro); err != nil {
		return fmt.Errorf("unable to get rollout %s/%s: %w", x.Namespace, Object, err)
	}
	if first == "" || ro.Status.Plan == nil {
		return nil // no plan was acknowledged: convergence speaks for this run
	}
	if got := strconv.Quote(ro.Status.Plan.ID); got != first {
		return fmt.Errorf("rollout %s/%s: %s: want the first acknowledged plan %s, got %s (done %d/%d): a plan was replaced",
			x.Namespace, Object, PlanID, first, got, ro.Status.Plan.Done, ro.Status.Plan.Steps)
	}
	return nil
}

// managerOptions are the manager options of the write: read-your-writes
// consistency for BlindReadYourWrites.
func (w Write) managerOptions(o *manager.Options) {
	if w == BlindReadYourWrites {
		o.Client.Cache = &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}
	}
}
