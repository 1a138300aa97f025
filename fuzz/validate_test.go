package fuzz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func noop(context.Context, *Exec) error { return nil }

// testEnv starts an Env for s, which the test stops when it ends.
func testEnv(t *testing.T, s Scenario) *Env {
	t.Helper()
	env, err := NewEnv(s)
	if err != nil {
		t.Fatalf("scenario %s: %v", s.Name, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("scenario %s: %v", s.Name, err)
		}
	})
	return env
}

// valid is a scenario Validate accepts, for the cases below to break.
func valid() Scenario {
	return Scenario{
		Name: "valid", Start: noop, Drive: noop,
		Clients: []string{"a", "b"}, Resources: []string{"configmaps"}, Objects: []string{"x"},
		Knobs: []Knob{{Name: "replicas", Values: 2}},
		Seeds: []Schedule{{Knobs: map[string]int{"replicas": 1}, Steps: []Step{
			{Client: "b", Resource: "configmaps", Object: "x", Start: 0, Length: DefaultBounds.MaxLength, Action: proxy.Hold},
		}}},
	}
}

func TestValidateNamesFieldAndFix(t *testing.T) {
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid scenario refused: %v", err)
	}
	for _, tc := range []struct {
		name    string
		breakIt func(*Scenario)
		want    []string
	}{
		{"no Start", func(s *Scenario) { s.Start = nil }, []string{"Start and Drive are required"}},
		{"a name no namespace can begin with", func(s *Scenario) { s.Name = "My_Scenario" }, []string{`Name "My_Scenario"`, "lowercase"}},
		{"seventeen clients", func(s *Scenario) {
			s.Clients = nil
			for i := range 17 {
				s.Clients = append(s.Clients, fmt.Sprint("c", i))
			}
		}, []string{"Clients: 17 names, at most 16"}},
		{"a client twice", func(s *Scenario) { s.Clients = []string{"a", "a"} }, []string{`Clients: "a" twice`}},
		{"sixteen objects", func(s *Scenario) {
			s.Objects = nil
			for i := range 16 {
				s.Objects = append(s.Objects, fmt.Sprint("o", i))
			}
		}, []string{"Objects: 16 names, at most 15"}},
		{"a knob of 300 values", func(s *Scenario) { s.Knobs[0].Values = 300 }, []string{`knob "replicas": Values 300, want 1 to 256`}},
		{"clients without resources", func(s *Scenario) { s.Resources = nil; s.Seeds = nil }, []string{"Resources 0", "declare both"}},
		{"a seed of an undeclared client", func(s *Scenario) { s.Seeds[0].Steps[0].Client = "c" }, []string{"Seeds[0]", `client "c" is not declared (Scenario.Clients: a, b)`}},
		{"a seed of an undeclared resource", func(s *Scenario) { s.Seeds[0].Steps[0].Resource = "configmap" }, []string{`resource "configmap" is not declared`}},
		{"a seed of an undeclared knob", func(s *Scenario) { s.Seeds[0].Knobs = map[string]int{"replica": 1} }, []string{`knob "replica" is not declared (Scenario.Knobs: replicas)`}},
		{"a seed with a drop in the lag-only space", func(s *Scenario) { s.Seeds[0].Steps[0].Action = proxy.Drop }, []string{"the lag-only space cannot hold it"}},
		{"a scope of an undeclared resource", func(s *Scenario) { s.Scopes = map[string]string{"nodes": Cluster} }, []string{`Scopes: "nodes" is not one of Resources`}},
		{"a scope that is no namespace", func(s *Scenario) { s.Scopes = map[string]string{"configmaps": "Kube_System"} }, []string{`Scopes["configmaps"]: namespace "Kube_System"`, "fuzz.Cluster"}},
		{"a Ready condition for kstatus", func(s *Scenario) { s.Converge = &Convergence{Ready: "Synced", KStatus: true} }, []string{`Converge: Ready "Synced" with KStatus`, "leave Ready empty"}},
		{"a quiet period as long as the settle budget", func(s *Scenario) { s.Quiet = SettleBudget }, []string{"quiet period"}},
		{"Realistic with default bounds", func(s *Scenario) { s.Space = Realistic; s.Seeds = nil }, []string{
			"over the 8s budget", "set MaxFaultEnd to 1.4s or less (it is 2.5s)",
		}},
		{"lag longer than the budget", func(s *Scenario) { s.Bounds = DefaultBounds; s.Bounds.MaxLagEnd = 4 * time.Second; s.Seeds = nil }, []string{
			"MaxLagEnd+MaxDelay (4s+1s) must be at most 4s: lower MaxLagEnd or MaxDelay by 1s",
		}},
		{"a long budget no longer than Budget", func(s *Scenario) { s.Long = 5 * time.Second }, []string{"Long 5s: want 0", "more than 8s and at most MaxLong (10m0s)"}},
		{"a long budget over MaxLong", func(s *Scenario) { s.Long = time.Hour }, []string{"Long 1h0m0s: want 0"}},
		{"lag longer than a long budget", func(s *Scenario) {
			s.Long = 20 * time.Second
			s.Bounds = Bounds{MaxStart: 10 * time.Second, MaxLength: 5 * time.Second, MaxLagEnd: 15 * time.Second, MaxDelay: 2 * time.Second}
			s.Seeds = nil
		}, []string{"MaxLagEnd+MaxDelay (15s+2s) must be at most 16s: lower MaxLagEnd or MaxDelay by 1s", "over the 20s budget"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			s.Knobs = append([]Knob(nil), s.Knobs...)
			s.Seeds = []Schedule{{Knobs: map[string]int{"replicas": 1}, Steps: append([]Step(nil), valid().Seeds[0].Steps...)}}
			tc.breakIt(&s)
			err := s.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// NewEnv refuses it the same way, before it starts anything.
			if _, nerr := NewEnv(s); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("NewEnv: got %v, want Validate's error", nerr)
			}
		})
	}
}

// A declared client that never connects and a resource no client requests
// are refused by NewEnv's warm-up, each named with the fix; a client that
// connects only at another knob setting is found there.
func TestWarmUpFindsUndeclaredUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// Client "a" lists configmaps; client "b" only when replicas=1.
	start := func(ctx context.Context, x *Exec) error {
		clients := []string{"a"}
		if x.Knob("replicas") == 1 {
			clients = append(clients, "b")
		}
		for _, c := range clients {
			cfg, err := x.Config(c)
			if err != nil {
				return err
			}
			cl, err := client.New(cfg, client.Options{})
			if err != nil {
				return err
			}
			if err := cl.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(x.Namespace)); err != nil {
				return fmt.Errorf("%s lists configmaps: %w", c, err)
			}
		}
		return nil
	}
	s := Scenario{Name: "warm-up", Start: start, Drive: noop, Clients: []string{"a", "b"}, Resources: []string{"configmaps"},
		Knobs: []Knob{{Name: "replicas", Values: 2}}}
	env, err := NewEnv(s)
	if err != nil {
		t.Fatalf("a client that connects at replicas=1 only: %v", err)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}

	s.Clients = []string{"a", "replica-0"}
	s.Resources = []string{"configmaps", "configmap", "configmapz", "secrets"}
	_, err = NewEnv(s)
	for _, want := range []string{
		`declared client "replica-0" sent no request in runs without lag at knob settings [map[replicas:0] map[replicas:1]]`,
		`declared resource "configmap" was requested by no client`, `did you mean "configmaps" (/v1, Resource=configmaps)?`,
		`declared resource "configmapz" was requested by no client`, "the apiserver serves no resource of that name",
		`declared resource "secrets" was requested by no client`, "the apiserver serves it (/v1, Resource=secrets)",
		"(the clients requested: configmaps)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewEnv: error lacks %q:\n%v", want, err)
		}
	}
	var h *HarnessError
	if errors.As(err, &h) {
		t.Errorf("a mistake in the scenario is not a harness error: %v", err)
	}
}

// Asking for an undeclared knob makes the execution a harness error that
// names it, not a silent 0.
func TestUnknownKnobIsAHarnessError(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	var ask string
	s := Scenario{Name: "knob", Knobs: []Knob{{Name: "replicas", Values: 2}}, Drive: noop,
		Start: func(ctx context.Context, x *Exec) error { _ = x.Knob(ask); return nil }}
	ask = "replicas"
	env, err := NewEnv(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ask = "replica"
	_, err = env.Run(context.Background(), Schedule{})
	var h *HarnessError
	if !errors.As(err, &h) || !strings.Contains(err.Error(), `Exec.Knob("replica"): scenario knob declares no such knob (Scenario.Knobs: replicas)`) {
		t.Fatalf("got %v, want a harness error naming the knob", err)
	}
}

// TestValidateLongBounds: a long scenario's lag windows may reach as far as
// its own budget allows, and no further than Budget allows without it.
func TestValidateLongBounds(t *testing.T) {
	s := valid()
	s.Seeds = nil
	s.Bounds = Bounds{MaxStart: 10 * time.Second, MaxLength: 5 * time.Second, MaxLagEnd: 12 * time.Second, MaxDelay: 2 * time.Second}
	if err := s.Validate(); err == nil {
		t.Fatal("windows up to 12 s accepted within the 8 s Budget")
	}
	s.Long = 20 * time.Second
	if err := s.Validate(); err != nil {
		t.Fatalf("windows up to 12 s refused within a 20 s Long budget: %v", err)
	}
}

// clientsetOf is a clientset for the execution's client, through the proxy.
func clientsetOf(x *Exec, client string) (*kubernetes.Clientset, error) {
	cfg, err := x.Config(client)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
