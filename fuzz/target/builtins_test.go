package target

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
)

// TestAwaitCurrent: the kinds a run waits for are those of the workload
// controllers kube-controller-manager runs, by either of their names, "*"
// for all of them, less those "-name" turns off.
func TestAwaitCurrent(t *testing.T) {
	for _, c := range []struct {
		controllers []string
		want        string
	}{
		{[]string{"statefulset", "garbagecollector"}, "[apps/v1, Kind=StatefulSet]"},
		{[]string{"job-controller"}, "[batch/v1, Kind=Job]"},
		{[]string{"replicaset-controller", "deployment"}, "[apps/v1, Kind=Deployment apps/v1, Kind=ReplicaSet]"},
		{[]string{"*", "-job-controller", "-daemonset"}, "[apps/v1, Kind=Deployment apps/v1, Kind=ReplicaSet apps/v1, Kind=StatefulSet]"},
		{[]string{"-statefulset", "*"}, "[apps/v1, Kind=DaemonSet apps/v1, Kind=Deployment batch/v1, Kind=Job apps/v1, Kind=ReplicaSet]"},
		{[]string{"garbagecollector"}, "[]"},
	} {
		if got := fmt.Sprint((&Builtins{Controllers: c.controllers}).awaitCurrent()); got != c.want {
			t.Errorf("controllers %v: AwaitCurrent %s, want %s", c.controllers, got, c.want)
		}
	}
}

// TestKinds: the kinds the apply steps create, each once, in order, with
// those a knob chooses left out: what the engine sweeps when cluster-scoped.
func TestKinds(t *testing.T) {
	steps := []step{
		{Step: Step{Apply: &Apply{}}, manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"},
		{Step: Step{Patch: &Patch{}}},
		{Step: Step{Apply: &Apply{}}, manifest: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}`},
		{Step: Step{Apply: &Apply{}}, manifest: "apiVersion: example.com/v1\nkind: ${kind}\nmetadata: {name: d}\n"},
	}
	if got, want := fmt.Sprint(kinds(steps)), "[rbac.authorization.k8s.io/v1, Kind=ClusterRole /v1, Kind=ConfigMap]"; got != want {
		t.Errorf("kinds %s, want %s", got, want)
	}
}

// TestBuiltinBinaries: a target whose builtins need kube-scheduler is
// refused by Prepare, before anything builds or starts, when the binary is
// not there, naming the variable that points at another.
func TestBuiltinBinaries(t *testing.T) {
	t.Setenv("STALEFUZZ_KUBE_SCHEDULER", filepath.Join(t.TempDir(), "absent"))
	tg := &Target{Name: "demo", Builtins: &Builtins{Scheduler: true}}
	err := Prepare(context.Background(), tg, nil)
	if err == nil || !strings.Contains(err.Error(), "builtins.scheduler: kube-scheduler not found") || !strings.Contains(err.Error(), "STALEFUZZ_KUBE_SCHEDULER") {
		t.Errorf("Prepare: %v, want kube-scheduler named as missing", err)
	}
	t.Setenv("STALEFUZZ_KUBE_SCHEDULER", os.Args[0]) // any file that exists
	if err := Prepare(context.Background(), tg, nil); err != nil {
		t.Errorf("Prepare with the binary there: %v", err)
	}
}

// TestControllerManagerRelease: a target that pins another
// kube-controller-manager release runs the binary hack/kcm-version.sh
// builds beside make assets' one, and is refused without it, naming that
// command; its own release is make assets' binary.
func TestControllerManagerRelease(t *testing.T) {
	assets := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	t.Setenv("STALEFUZZ_KUBE_CONTROLLER_MANAGER", "")
	tg := &Target{Name: "demo", Builtins: &Builtins{Controllers: []string{"job"}, ControllerManager: "k8s.io/kubernetes@v1.35.4"}}
	err := Prepare(context.Background(), tg, nil)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(assets, "kube-controller-manager-v1.35.4")) || !strings.Contains(err.Error(), "hack/kcm-version.sh v1.35.4") {
		t.Errorf("Prepare: %v, want kube-controller-manager-v1.35.4 named as missing, with the command that builds it", err)
	}
	if err := os.WriteFile(filepath.Join(assets, "kube-controller-manager-v1.35.4"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(context.Background(), tg, nil); err != nil {
		t.Errorf("Prepare with v1.35.4's binary there: %v", err)
	}
	tg.Builtins.ControllerManager = "k8s.io/kubernetes@" + controlplane.KubernetesVersion
	if got, want := tg.Builtins.controllerManagerBinary(), filepath.Join(assets, "kube-controller-manager"); got != want {
		t.Errorf("the control plane's own release runs %s, want make assets' %s", got, want)
	}
}
