package contention_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/scenarios/contention"
)

// sweepFiguresEnv names how many executions TestSweepFigures runs; unset,
// it is skipped (make sweep-figures sets it).
const sweepFiguresEnv = "STALEFUZZ_SWEEP_FIGURES"

// TestSweepFigures runs the contention scenario (one replica, the
// optimistic patch, a relist at the plan's own event every other execution)
// N times in one Env and prints the executions a minute of each tenth of
// the run, and what is left in the apiserver afterwards: namespaces,
// rollouts, events. It asserts nothing; it is a figure.
func TestSweepFigures(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(sweepFiguresEnv))
	if err != nil || n <= 0 {
		t.Skipf("a figure: set $%s to a number of executions (make sweep-figures)", sweepFiguresEnv)
	}
	env, err := fuzz.NewEnv(contention.Realistic(contention.Optimistic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheds := []fuzz.Schedule{{Knobs: map[string]int{"replicas": 0}}, atThePlansEvent(proxy.Expire, contention.RealisticBounds.MaxLength)}
	ctx := context.Background()
	tenth := max(1, n/10)
	began, lap := time.Now(), time.Now()
	var harness, unswept int
	for i := range n {
		res, err := env.Run(ctx, scheds[i%len(scheds)])
		if err != nil {
			harness++
		} else if res.SweepErr != nil {
			unswept++
		}
		if (i+1)%tenth == 0 {
			t.Logf("executions %d–%d: %.1f a minute", i+2-tenth, i+1, float64(tenth)/time.Since(lap).Minutes())
			lap = time.Now()
		}
	}
	t.Logf("%d executions in %v (%.1f a minute), %d harness errors, %d sweeps unfinished", n, time.Since(began).Round(time.Second), float64(n)/time.Since(began).Minutes(), harness, unswept)
	meta, err := metadata.NewForConfig(env.Proxy().Upstream)
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{
		corev1.SchemeGroupVersion.WithResource("namespaces"),
		contention.GroupVersion.WithResource("rollouts"),
		corev1.SchemeGroupVersion.WithResource("events"),
	} {
		list, err := meta.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("left in the apiserver after %d executions: %d %s", n, len(list.Items), gvr.Resource)
		if gvr.Resource == "namespaces" {
			for _, ns := range list.Items {
				fmt.Fprintf(os.Stderr, "  namespace %s\n", ns.Name)
			}
		}
	}
}
