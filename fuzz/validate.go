package fuzz

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits of what a scenario declares, set by the input layout (see
// codec.decode): a client or resource is a nibble, an object a nibble with 0
// for "every object", a knob value a byte.
const (
	MaxClients   = 16
	MaxResources = 16
	MaxObjects   = 15
	MaxKnobValue = 256
)

// Validate reports every mistake in s that would make a campaign fail or,
// worse, search nothing, each naming the field and the fix: what NewEnv and
// Fuzz refuse before anything starts. A declared client or resource that no
// controller uses is found only by running the scenario (NewEnv's warm-up).
func (s Scenario) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Start == nil || s.Drive == nil {
		bad("Start and Drive are required")
	}
	if s.Name == "" {
		bad("Name is required: it names the executions' namespaces and the findings' files")
	} else if ns := strings.ToLower(s.Name) + "-4194304-1000000"; len(validation.IsDNS1123Label(ns)) > 0 {
		bad("Name %q: want lowercase letters, digits and '-', at most 47 characters: it begins every execution's namespace (%q: %s)", s.Name, ns, strings.Join(validation.IsDNS1123Label(ns), "; "))
	}
	if s.Space < LagOnly || s.Space > Composed {
		bad("Space %v: want LagOnly, LagAndLoss, Realistic, AnchoredLoss, RealisticLatency, OrdinaryLatency or Composed", s.Space)
	}
	checkNames := func(field string, names []string, limit int) {
		if len(names) > limit {
			bad("%s: %d names, at most %d fit the input layout", field, len(names), limit)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" {
				bad("%s: an empty name", field)
			} else if seen[n] {
				bad("%s: %q twice (each must be one index in the input layout)", field, n)
			}
			seen[n] = true
		}
	}
	checkNames("Clients", s.Clients, MaxClients)
	checkNames("Resources", s.Resources, MaxResources)
	checkNames("Objects", s.Objects, MaxObjects)
	if (len(s.Clients) == 0) != (len(s.Resources) == 0) {
		bad("Clients has %d names and Resources %d: with either empty, no input decodes to a lag step and the fuzzer searches knobs only; declare both, or neither for a scenario without lag", len(s.Clients), len(s.Resources))
	}
	for _, r := range slices.Sorted(maps.Keys(s.Scopes)) {
		where := s.Scopes[r]
		if !slices.Contains(s.Resources, r) {
			bad("Scopes: %q is not one of Resources %q; declare it there too, or remove it from Scopes", r, s.Resources)
		}
		if where != Cluster {
			if errs := validation.IsDNS1123Label(where); len(errs) > 0 {
				bad("Scopes[%q]: namespace %q: %s (fuzz.Cluster for a cluster-scoped resource)", r, where, strings.Join(errs, "; "))
			}
		}
	}
	var knobs []string
	for _, k := range s.Knobs {
		knobs = append(knobs, k.Name)
		if k.Values < 1 || k.Values > MaxKnobValue {
			bad("knob %q: Values %d, want 1 to %d (one input byte)", k.Name, k.Values, MaxKnobValue)
		}
	}
	checkNames("Knobs", knobs, len(knobs))
	for _, p := range append(slices.Clone(s.LostUpdates), s.Fields...) {
		if p == "" || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
			bad("field path %q (LostUpdates, Fields): want a dotted JSON path such as status.plan.id", p)
		}
	}
	if c := s.Converge; c != nil && c.KStatus && c.Ready != "" {
		bad("Converge: Ready %q with KStatus, which reads a condition Ready itself and no other: leave Ready empty, or unset KStatus to require condition %s=True", c.Ready, c.Ready)
	}
	if err := s.validQuiet(); err != nil {
		bad("%w", err)
	}
	if s.Long != 0 && (s.Long <= Budget || s.Long > MaxLong) {
		bad("Long %v: want 0 (executions within Budget, %v) or more than %v and at most MaxLong (%v): an execution that must reach a timer its controller cannot shorten", s.Long, Budget, Budget, MaxLong)
	}
	if err := s.Bounds.orDefault().fitsWithin(s.Space, s.budget()); err != nil {
		bad("%w", err)
	}
	for i, seed := range s.Seeds {
		if err := s.checkSchedule(seed); err != nil {
			bad("Seeds[%d] (%s): %w", i, seed, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("scenario %q: %w", s.Name, err)
	}
	return nil
}

// checkSchedule reports why sch is not a schedule of s: a name s does not
// declare (Encode would write index 0 for it, another name), an action or
// field the space cannot hold, a value out of bounds; nil when Decode gives
// sch back from Encode's bytes.
func (s Scenario) checkSchedule(sch Schedule) error {
	var errs []error
	for k, v := range sch.Knobs {
		i := slices.IndexFunc(s.Knobs, func(d Knob) bool { return d.Name == k })
		if i < 0 {
			errs = append(errs, fmt.Errorf("knob %q is not declared (Scenario.Knobs: %s)", k, names(s.Knobs)))
		} else if v < 0 || v >= s.Knobs[i].Values {
			errs = append(errs, fmt.Errorf("knob %s=%d: want 0 to %d", k, v, s.Knobs[i].Values-1))
		}
	}
	for i, st := range sch.Steps {
		if !slices.Contains(s.Clients, st.Client) {
			errs = append(errs, fmt.Errorf("step %d: client %q is not declared (Scenario.Clients: %s)", i, st.Client, strings.Join(s.Clients, ", ")))
		}
		if st.Resource != "" && !slices.Contains(s.Resources, st.Resource) {
			errs = append(errs, fmt.Errorf("step %d: resource %q is not declared (Scenario.Resources: %s)", i, st.Resource, strings.Join(s.Resources, ", ")))
		}
		if st.Object != "" && !slices.Contains(s.Objects, st.Object) {
			errs = append(errs, fmt.Errorf("step %d: object %q is not declared (Scenario.Objects: %s)", i, st.Object, strings.Join(s.Objects, ", ")))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	back := s.Decode(s.Encode(sch))
	if len(back.Knobs) == 0 && len(sch.Knobs) == 0 {
		back.Knobs = sch.Knobs // nil and empty are one setting
	}
	// Durations round to the nearest the layout holds (a few percent of
	// their bound at most): only what does not round trip otherwise is a
	// mistake.
	near := cmp.Comparer(func(a, b time.Duration) bool {
		d := max(a-b, b-a)
		return d <= 50*time.Millisecond || d <= max(a, b)/20
	})
	if diff := cmp.Diff(withKnobs(sch, s.Knobs), back, cmpopts.EquateEmpty(), near); diff != "" {
		return fmt.Errorf("the %v space cannot hold it: it decodes back as %s (-seed +decoded):\n%s", s.Space, back, diff)
	}
	return nil
}

// withKnobs is sch with every declared knob set (an unset knob is 0).
func withKnobs(sch Schedule, knobs []Knob) Schedule {
	if len(knobs) == 0 {
		return sch
	}
	out := Schedule{Knobs: map[string]int{}, Steps: sch.Steps}
	for _, k := range knobs {
		out.Knobs[k.Name] = sch.Knobs[k.Name]
	}
	return out
}

func names(knobs []Knob) string {
	var out []string
	for _, k := range knobs {
		out = append(out, k.Name)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// lagBudget is how long the lag of one execution may last (from the mark
// to the end of what its windows and faults set off) for it to fit Budget.
func lagBudget() time.Duration { return lagBudgetOf(Budget) }

// lagBudgetOf is lagBudget for an execution whose budget is budget.
func lagBudgetOf(budget time.Duration) time.Duration {
	return budget - StartBudget - DriveBudget - SettleBudget - StopBudget
}
