package kuberay_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
	"github.com/stalefuzz/stalefuzz/proxy"
)

// FuzzKubeRay searches faults a real cluster produces for the operator, as
// `stalefuzz fuzz target.yaml` does.
func FuzzKubeRay(f *testing.F) { target.Fuzz(f, "target.yaml") }

// TestKubeRay runs the operator without faults for each value of the knob
// action (at=500ms) and prints what it did: pods created and deleted, writes
// per resource, violations, phase times and its log.
func TestKubeRay(t *testing.T) {
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	for i, name := range []string{"nothing", "scale to 3", "scale to 1"} {
		t.Run(name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"action": i, "at": 0}}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(1))
			if res == nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			t.Log(summary(sched, res))
			if err != nil {
				t.Errorf("schedule %s: %v", sched, err)
			}
		})
	}
}

// summary is what one run did: pods created and deleted (from the trace:
// the namespace is swept after the run), writes per resource, violations,
// phase times and the controllers' log.
func summary(sched fuzz.Schedule, res *fuzz.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %s: namespace %s, elapsed %v, settled %v\n", sched, res.Namespace, res.Elapsed, res.Settled)
	fmt.Fprintf(&b, "phases: %s\n", res.Phases)
	created, deleted := 0, 0
	var createdNames []string
	writes := map[string]int{}
	for _, r := range res.Trace.Requests {
		if r.DryRun {
			continue
		}
		if r.Resource == "pods" && r.Subresource == "" && r.Verb == "create" && r.Code == 201 {
			created++
			createdNames = append(createdNames, r.Name)
		}
		if r.Resource == "pods" && r.Subresource == "" && r.Verb == "delete" && r.Code/100 == 2 {
			deleted++
		}
		switch r.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			res := r.Resource
			if r.Subresource != "" {
				res += "/" + r.Subresource
			}
			writes[fmt.Sprintf("%s %s %s %d", r.Client, r.Verb, res, r.Code)]++
		}
	}
	fmt.Fprintf(&b, "pods created: %d %v; pods deleted: %d\n", created, createdNames, deleted)
	fmt.Fprintf(&b, "writes (client verb resource code: count):\n")
	for _, k := range slices.Sorted(maps.Keys(writes)) {
		fmt.Fprintf(&b, "  %s: %d\n", k, writes[k])
	}
	fmt.Fprintf(&b, "violations: %d\n", len(res.Violations))
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "  %s: %s\n", v.Oracle, v.Message)
	}
	fmt.Fprintf(&b, "controllers' log:\n")
	_ = res.Logs.WriteTo(&b, res.Mark)
	return b.String()
}

// TestKubeRayFaults runs two realistic faults at knob action=nothing (the
// learned count limit: 3 live Pods per RayCluster, a head and two workers):
// a restart right after the operator's second Pod create (the first
// worker) onto an apiserver that has not seen it, and the same restart onto
// an up-to-date apiserver.
func TestKubeRayFaults(t *testing.T) {
	tg, err := target.Load("target.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	env, err := fuzz.NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	restart := func(lag time.Duration) fuzz.Step {
		return fuzz.Step{Client: "kuberay", Resource: "pods", Verbs: []string{"create"}, After: 1, Action: proxy.Freeze, Length: time.Second, Lag: lag}
	}
	for _, c := range []struct {
		name string
		step fuzz.Step
	}{
		{"restart after the first worker's create, lagging apiserver", restart(400 * time.Millisecond)},
		{"restart after the first worker's create, up-to-date apiserver", restart(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			sched := fuzz.Schedule{Knobs: map[string]int{"action": 0, "at": 0}, Steps: []fuzz.Step{c.step}}
			res, err := env.Run(context.Background(), sched, fuzz.Retries(1))
			if res == nil {
				t.Fatalf("schedule %s: %v", sched, err)
			}
			t.Log(summary(sched, res))
			if err != nil {
				t.Errorf("schedule %s: %v", sched, err)
			}
		})
	}
}
