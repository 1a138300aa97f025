package kuberay_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/target"
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
			t.Log(b.String())
			if err != nil {
				t.Errorf("schedule %s: %v", sched, err)
			}
		})
	}
}
