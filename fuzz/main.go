package fuzz

import (
	"fmt"
	"os"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
)

// Main runs a test binary's tests, with one control plane shared by every
// Env the binary starts (its suites' and its fuzz targets'), instead of one
// per Env, and stops it when they are done. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(fuzz.Main(m)) }
//
// Each Env still has its own proxy, adds its scenario's CRDs to the shared
// apiserver, and runs every execution in a fresh namespace of its own, so
// sharing saves a control plane start (seconds) per Env and changes nothing
// an execution sees. A scenario whose controller acts cluster wide (not
// confined to its namespaces) must tolerate other Envs' objects, or not use
// Main. Without Main, each Env starts and stops its own control plane.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.enabled = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cp != nil {
		if err := shared.cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stalefuzz: unable to stop the shared control plane: %v\n", err)
			code = max(code, 1)
		}
		shared.cp = nil
	}
	return code
}

// shared is the control plane Main shares: the one piece of process-wide
// state in the package, because TestMain is the only owner a test binary's
// Envs have in common.
var shared struct {
	mu      sync.Mutex
	enabled bool
	cp      *controlplane.Environment
}

// controlPlane returns the control plane an Env runs on, with its CRDs
// installed, and whether the Env owns it (and must stop it).
func controlPlane(crds envtest.CRDInstallOptions, gates map[string]bool, share bool) (_ *controlplane.Environment, installed []*apiextensionsv1.CustomResourceDefinition, own bool, _ error) {
	quietGlobalLog()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.enabled || !share {
		cp := &controlplane.Environment{CRDs: crds, FeatureGates: gates}
		if err := cp.Start(); err != nil {
			return nil, nil, false, err
		}
		return cp, cp.InstalledCRDs(), true, nil
	}
	if shared.cp == nil {
		cp := &controlplane.Environment{}
		if err := cp.Start(); err != nil {
			return nil, nil, false, err
		}
		shared.cp = cp
	}
	installed, err := envtest.InstallCRDs(shared.cp.Config, crds)
	if err != nil {
		return nil, nil, false, fmt.Errorf("unable to install CRDs %v %v in the shared control plane: %w", crds.Paths, crdNames(crds.CRDs), err)
	}
	return shared.cp, installed, false, nil
}

func crdNames(crds []*apiextensionsv1.CustomResourceDefinition) []string {
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
	}
	return names
}
