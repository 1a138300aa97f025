package controlplane_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
)

// helperEnv selects the child mode of this test binary: the child starts a
// control plane, prints its PIDs and working directory, then dies as told.
const helperEnv = "STALEFUZZ_CONTROLPLANE_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "panic", "hang":
		env := &controlplane.Environment{}
		if err := env.Start(); err != nil {
			fmt.Println("START-ERROR", err)
			os.Exit(3)
		}
		pids := env.PIDs()
		fmt.Printf("PIDS %s\n", strings.Trim(fmt.Sprint(pids), "[]"))
		if os.Getenv(helperEnv) == "panic" {
			panic("helper: panicking with a running control plane")
		}
		select {} // wait to be killed
	}
}

func TestStartStop(t *testing.T) {
	env := &controlplane.Environment{}
	if err := env.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	pids := env.PIDs()
	if len(pids) < 2 {
		t.Errorf("want at least 2 recorded PIDs (etcd, kube-apiserver), got %v", pids)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != controlplane.KubernetesVersion {
		t.Errorf("apiserver reports %q, want %q (version ldflags in hack/assets.sh)", v.GitVersion, controlplane.KubernetesVersion)
	}
	if err := env.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := env.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	waitGone(t, pids)
}

// TestFailedStartLeavesNothing: a start that fails after the apiserver
// ran (a CRD it refuses) leaves no process and nothing in $TMPDIR, not even
// envtest's webhook certificate directory (envtest-serving-certs-*).
func TestFailedStartLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	bad := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Labels: map[string]string{"app": "{{ .Release.Name }}"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	env := &controlplane.Environment{}
	env.CRDs.CRDs = []*apiextensionsv1.CustomResourceDefinition{bad}
	err := env.Start()
	if err == nil || !strings.Contains(err.Error(), "widgets.example.com") {
		_ = env.Stop()
		t.Fatalf("start with a CRD the apiserver refuses: got %v, want an error naming it", err)
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left in $TMPDIR after a failed start: %s", e.Name())
	}
}

// TestRestartAPIServer stops kube-apiserver alone and starts it again: it
// comes back on the same address with what etcd stored, under a new PID,
// and the old process is gone.
func TestRestartAPIServer(t *testing.T) {
	env := &controlplane.Environment{}
	if err := env.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace restart: %v", err)
	}
	before := env.PIDs()

	if err := env.StopAPIServer(); err != nil {
		t.Fatalf("StopAPIServer: %v", err)
	}
	if err := env.StopAPIServer(); err != nil {
		t.Errorf("second StopAPIServer: %v", err)
	}
	down := env.PIDs()
	if len(down) != len(before)-1 {
		t.Errorf("PIDs with kube-apiserver stopped: %v, want one fewer than %v (etcd still running)", down, before)
	}
	for _, pid := range before {
		if !slices.Contains(down, pid) {
			waitGone(t, []int{pid})
		}
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "restart", metav1.GetOptions{}); err == nil {
		t.Error("get namespace restart with kube-apiserver stopped: want an error")
	}

	host := env.Config.Host
	if err := env.StartAPIServer(); err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Errorf("second StartAPIServer: %v", err)
	}
	if env.Config.Host != host {
		t.Errorf("apiserver came back at %s, want %s", env.Config.Host, host)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "restart", metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace restart after the restart (etcd kept it): %v", err)
	}
	if up := env.PIDs(); len(up) != len(before) || slices.Equal(up, before) {
		t.Errorf("PIDs after the restart: %v, want as many as %v with a new kube-apiserver", up, before)
	}
}

func TestMissingAssetsSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	env := &controlplane.Environment{AssetsDir: dir}
	err := env.Start()
	if !errors.Is(err, controlplane.ErrAssetsMissing) {
		t.Fatalf("want ErrAssetsMissing, got %v", err)
	}
	for _, want := range []string{dir, "make assets", "KUBEBUILDER_ASSETS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestNoProcessOutlivesPanic(t *testing.T) { testNoProcessOutlives(t, "panic", nil) }

func TestNoProcessOutlivesSIGKILL(t *testing.T) {
	testNoProcessOutlives(t, "hang", func(p *os.Process) { _ = p.Signal(syscall.SIGKILL) })
}

func TestNoProcessOutlivesSIGINT(t *testing.T) {
	testNoProcessOutlives(t, "hang", func(p *os.Process) { _ = p.Signal(syscall.SIGINT) })
}

// testNoProcessOutlives runs this binary as a child that starts a control
// plane and then dies (by panic, or by kill once it printed its PIDs), and
// checks that every process the child started is gone and its working
// directory removed.
func testNoProcessOutlives(t *testing.T, mode string, kill func(*os.Process)) {
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// If this test fails before the child dies, the child must not live on
	// (and with it the processes it started).
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "PIDS "); ok {
			for _, f := range strings.Fields(rest) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
			break
		}
		if strings.HasPrefix(line, "START-ERROR") {
			t.Fatalf("child: %s", line)
		}
	}
	if len(pids) < 2 {
		_ = cmd.Process.Kill()
		t.Fatalf("child printed no PIDs")
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("PID %d not running while the child is alive", pid)
		}
	}
	if kill != nil {
		kill(cmd.Process)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(os.Stderr) }()
	err = cmd.Wait()
	if err == nil {
		t.Fatalf("child exited cleanly; want a %s death", mode)
	}
	waitGone(t, pids)
	// The reaper also removed the working directory (certificates, etcd data).
	// Nothing else the child made in $TMPDIR survives either: not envtest's
	// webhook certificates (envtest-serving-certs-*), not a stalefuzz-*
	// directory.
	var left []string
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		left, _ = filepath.Glob(filepath.Join(tmp, "*"))
		return len(left) == 0, nil
	}); err != nil {
		t.Errorf("left behind in $TMPDIR after %s: %v", mode, left)
	}
}

// waitGone fails t unless every pid has exited (or is a zombie awaiting its
// reaper) within 15s.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
			return reaper.Gone(pid), nil
		})
		if err != nil {
			t.Errorf("PID %d (%s) still running 15s after its owner ended", pid, comm(pid))
		}
	}
}

// comm is pid's command name as ps reports it (ps rather than /proc, which
// darwin lacks).
func comm(pid int) string {
	b, _ := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
	return strings.TrimSpace(string(b))
}

// TestFeatureGates: FeatureGates reach kube-apiserver's --feature-gates.
// With WatchList off (as 1.31 and 1.33 ship it) the apiserver says so in
// its kubernetes_feature_enabled metric and refuses a watch that asks for
// its initial events (what an informer's WatchList asks), so that a
// client-go informer lists instead; with no gates set it serves them.
func TestFeatureGates(t *testing.T) {
	for _, c := range []struct {
		gates map[string]bool
		on    bool
	}{{map[string]bool{"WatchList": false}, false}, {nil, true}} {
		t.Run(fmt.Sprint(c.gates), func(t *testing.T) {
			env := &controlplane.Environment{FeatureGates: c.gates}
			if err := env.Start(); err != nil {
				t.Fatalf("start: %v", err)
			}
			defer func() {
				if err := env.Stop(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			cs, err := kubernetes.NewForConfig(env.Config)
			if err != nil {
				t.Fatal(err)
			}
			metrics, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
			if err != nil {
				t.Fatalf("GET /metrics: %v", err)
			}
			want := "0"
			if c.on {
				want = "1"
			}
			var got string
			for _, line := range strings.Split(string(metrics), "\n") {
				if strings.HasPrefix(line, `kubernetes_feature_enabled{name="WatchList",`) {
					got = line[strings.LastIndex(line, " ")+1:]
				}
			}
			if got != want {
				t.Errorf("kubernetes_feature_enabled for WatchList = %q, want %s", got, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
				SendInitialEvents: ptrTo(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
			})
			if w != nil {
				w.Stop()
			}
			if refused := err != nil; refused == c.on {
				t.Errorf("a watch asking for its initial events: error %v; want it refused only with WatchList off", err)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
