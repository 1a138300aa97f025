package target_test

import (
	"testing"

	"github.com/stalefuzz/stalefuzz/fuzz/target"
)

// A target in Go is the same declaration as a target file: here a
// controller built from a Go module at a pinned version, its CRDs from the
// same module's zip, one object, and the convergence oracle (kstatus).
func Example() {
	t := &target.Target{
		Name: "source-controller",
		Controllers: []target.Controller{{
			Name:         "source",
			Go:           "github.com/fluxcd/source-controller@v1.9.3",
			Args:         []string{"--watch-all-namespaces=false", "--storage-path=/tmp/storage"},
			NamespaceEnv: "RUNTIME_NAMESPACE",
			Watches:      []string{"gitrepositories"},
		}},
		CRDs:     []string{"github.com/fluxcd/source-controller@v1.9.3:config/crd/bases"},
		Workload: []target.Step{{Apply: &target.Apply{File: "gitrepository.yaml"}}},
		Oracles:  target.Oracles{Converge: &target.Kind{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "GitRepository"}},
	}
	_ = t // in a fuzz test: s, err := t.Scenario(); fuzz.Fuzz(f, s)
}

// The fuzz target of a target file, as scenarios/pymirror has it.
func ExampleFuzz() {
	_ = func(f *testing.F) { target.Fuzz(f, "target.yaml") }
}
