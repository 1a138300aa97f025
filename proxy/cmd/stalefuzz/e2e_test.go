package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/stalefuzz/stalefuzz/proxy/audit"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestProxyCommand runs the proxy command against a real apiserver: in this
// process (no goroutine survives it), then as the installed binary would
// run (a hold seen by a real informer, reloads, signals, the trace, and the
// report and audit of that trace).
func TestProxyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp, kubeconfig := startControlPlane(t)

	t.Run("in process", func(t *testing.T) { testInProcess(t, kubeconfig, false) })
	t.Run("in process, trace in memory", func(t *testing.T) { testInProcess(t, kubeconfig, true) })
	t.Run("binary", func(t *testing.T) { testBinary(t, cp.Config, kubeconfig) })
}

// testInProcess runs the proxy command's body with signals from a channel,
// and checks that it writes its files, answers its control endpoint, and
// leaves no goroutine and no file but the kubeconfig and the trace, which
// holds the two marks' rule changes.
func testInProcess(t *testing.T, kubeconfig string, traceInMemory bool) {
	g := NewWithT(t)
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	mustWrite(t, rules, "- client: c\n  action: drop\n- client: nobody\n  action: drop\n")
	out := filepath.Join(dir, "out")
	o := proxyOptions{kubeconfig: kubeconfig, context: "envtest", clients: []string{"c"}, rules: rules,
		trace: filepath.Join(dir, "trace.jsonl"), out: out, control: "127.0.0.1:0", markNow: true, traceInMemory: traceInMemory}

	before := goleak.IgnoreCurrent()
	sigs := make(chan os.Signal, 1)
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- runProxy(context.Background(), o, &stderr, sigs) }()
	addr := waitControl(t, out, done, &stderr)

	g.Expect(stderr.String()).To(ContainSubstring("(by --mark-now): 2 rule(s) in force"))
	g.Expect(stderr.String()).NotTo(ContainSubstring("no rule is in force"))
	g.Expect(stderr.String()).To(ContainSubstring(`warning: rule 2 names client "nobody", which is not a --client (c): it never matches`))
	code, body := post(t, addr, "/mark")
	g.Expect(code).To(Equal(http.StatusOK), "POST /mark: %s", body)
	g.Expect(body).To(ContainSubstring("2 rule(s) in force"))
	// The endpoint refuses another Host (DNS rebinding) and cross-origin
	// browser requests.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mark", nil)
	req.Host = "attacker.example:80"
	g.Expect(do(t, req)).To(Equal(http.StatusForbidden), "a request with a foreign Host")
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/mark", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	g.Expect(do(t, req)).To(Equal(http.StatusForbidden), "a cross-site browser request")
	req, _ = http.NewRequest(http.MethodGet, "http://"+addr+"/mark", nil)
	g.Expect(do(t, req)).To(Equal(http.StatusMethodNotAllowed), "GET /mark")
	// The client's listener admits only the client: its kubeconfig's token,
	// addressed to its own loopback address.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(out, "c.kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.BearerToken).NotTo(BeEmpty(), "the kubeconfig carries the client's token")
	// A transport that trusts the listener's certificate and sends nothing
	// else of the kubeconfig.
	listener, err := rest.TransportFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	g.Expect(err).NotTo(HaveOccurred())
	secrets := func(host, token string) int {
		req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/api/v1/namespaces/default/secrets", nil)
		if host != "" {
			req.Host = host
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := listener.RoundTrip(req)
		if err != nil {
			t.Fatalf("GET %s as the client: %v", req.URL, err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	g.Expect(secrets("", "")).To(Equal(http.StatusUnauthorized), "a request to the client's listener without its token")
	g.Expect(secrets("attacker.example", cfg.BearerToken)).To(Equal(http.StatusForbidden), "a request to the client's listener with a foreign Host")
	g.Expect(secrets("", cfg.BearerToken)).To(Equal(http.StatusOK), "the client's own request")

	sigs <- syscall.SIGINT
	select {
	case err := <-done:
		g.Expect(err).NotTo(HaveOccurred(), "stderr:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("runProxy still running 30s after SIGINT; stderr:\n%s", stderr.String())
	}
	// goleak retries until the goroutines ending (connection readers) are
	// gone, within its own budget.
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after the proxy command returned: %v", err)
	}
	g.Expect(ls(t, out)).To(Equal([]string{"c.kubeconfig"}), "what the command leaves in --out")
	g.Expect(ls(t, dir)).To(ConsistOf("rules.yaml", "trace.jsonl", "out"))
	for path, mode := range map[string]os.FileMode{o.trace: 0o600, out: os.ModeDir | 0o700} {
		fi, err := os.Stat(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Mode()).To(Equal(mode), "mode of %s", path)
	}
	g.Expect(readTraceFile(t, o.trace).Rules).To(HaveLen(2), "the trace's rule changes: --mark-now and POST /mark")
	g.Expect(stderr.String()).To(ContainSubstring("context envtest"))
	g.Expect(stderr.String()).To(ContainSubstring("answers: Kubernetes " + controlplane.KubernetesVersion))
}

// testBinary is the end-to-end test of the built command.
func testBinary(t *testing.T, admin *rest.Config, kubeconfig string) {
	g := NewWithT(t)
	ctx := t.Context()
	bin := buildCommand(t)

	// A fresh namespace with two ConfigMaps, made directly.
	direct := kubernetes.NewForConfigOrDie(admin)
	ns := "stalefuzz-e2e"
	_, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"held", "other"} {
		_, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "original"},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tmp := filepath.Join(dir, "tmp") // the command's $TMPDIR: must stay empty
	traceDir := filepath.Join(dir, "trace")
	for _, d := range []string{tmp, traceDir} {
		g.Expect(os.Mkdir(d, 0o700)).To(Succeed())
	}
	tracePath := filepath.Join(traceDir, "trace.jsonl")
	rules := filepath.Join(dir, "rules.yaml")
	holdFor := func(to string) string {
		return fmt.Sprintf(`# The watcher's MODIFIED events of one ConfigMap are held
# from the mark until %[2]s after it.
rules:
  - client: watcher
    resource: configmaps
    namespace: %[1]s
    name: held
    types: [MODIFIED]
    action: hold
    from: 0s
    to: %[2]s
`, ns, to)
	}
	mustWrite(t, rules, holdFor("3s"))

	rc := startCommand(t, bin, dir, []string{"TMPDIR=" + tmp}, "proxy", "--kubeconfig", kubeconfig, "--context", "envtest",
		"--client", "watcher", "--rules", rules, "--trace", tracePath, "--out", out)
	cmd, pid, wait, stderr := rc.cmd, rc.cmd.Process.Pid, rc.wait, &rc.stderr
	addr := waitControl(t, out, rc.exited, stderr)
	kc := filepath.Join(out, "watcher.kubeconfig")
	// The command's stderr reaches the buffer through a pipe: what it wrote
	// before an event shows up shortly after it.
	saysSoon := func(want string) {
		t.Helper()
		g.Eventually(stderr.String).WithTimeout(5 * time.Second).Should(ContainSubstring(want))
	}
	saysSoon("KUBECONFIG=" + kc + " kubectl")
	saysSoon("no rule is in force until the mark")
	saysSoon("rule 1 (trace index 0): hold configmaps " + ns + "/held [MODIFIED] for watcher during t+0s–3s")

	// A real informer of the watcher's, through its kubeconfig.
	watcherCfg, err := clientcmd.BuildConfigFromFlags("", kc)
	g.Expect(err).NotTo(HaveOccurred())
	watcher := kubernetes.NewForConfigOrDie(watcherCfg)
	factory := informers.NewSharedInformerFactoryWithOptions(watcher, 0, informers.WithNamespace(ns))
	lister := factory.Core().V1().ConfigMaps().Lister()
	informerCtx, stopInformer := context.WithCancel(context.WithoutCancel(ctx))
	t.Cleanup(func() { stopInformer(); factory.Shutdown() })
	factory.Start(informerCtx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		g.Expect(ok).To(BeTrue(), "informer of %v synced within 30s", typ)
	}
	cancel()
	seen := func() string {
		cm, err := lister.ConfigMaps(ns).Get("held")
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return cm.Data["v"]
	}
	update := func(v string) string {
		cm, err := direct.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, fmt.Appendf(nil, `{"data":{"v":%q}}`, v), metav1.PatchOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return cm.ResourceVersion
	}
	g.Expect(seen()).To(Equal("original"))

	// 1. The mark puts the hold in force: the informer does not see the
	// update for the window, then does.
	marked := time.Now()
	code, body := post(t, addr, "/mark")
	g.Expect(code).To(Equal(http.StatusOK), "POST /mark: %s", body)
	rv1 := update("fresh1")
	g.Consistently(seen).WithTimeout(time.Second).WithPolling(50*time.Millisecond).Should(Equal("original"), "held: the informer must not see fresh1 during the window")
	g.Eventually(seen).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(Equal("fresh1"), "released when the window ends")
	g.Expect(time.Since(marked)).To(BeNumerically(">=", 2500*time.Millisecond), "the window is 3s from the mark")
	// The trace file grows during the run: the released event is in it
	// within a flush (a second), long before the exit.
	g.Eventually(func() []trace.Event { tr, _ := readTrace(tracePath); return tr.Events }).WithTimeout(5*time.Second).WithPolling(100*time.Millisecond).Should(ContainElement(And(
		HaveField("Name", "held"), HaveField("ResourceVersion", rv1), HaveField("Fate", trace.Released),
	)), "%s during the run: the event released at the end of the hold", tracePath)

	// A write through the proxy, with no optimistic lock, for the audit.
	_, err = watcher.CoreV1().ConfigMaps(ns).Patch(ctx, "other", types.MergePatchType, []byte(`{"data":{"by":"watcher"}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "merge patch through the proxy")

	// 2. A reload of a file with an error keeps the old rules, and says
	// which line is wrong.
	mustWrite(t, rules, strings.Replace(holdFor("1h"), "action: hold", "acton: hold", 1))
	code, body = post(t, addr, "/reload")
	wantErr := rules + `:9: rule 1: field "acton" not known (did you mean "action"?)`
	g.Expect(code).To(Equal(http.StatusUnprocessableEntity), "POST /reload of a bad file: %s", body)
	g.Expect(body).To(ContainSubstring(wantErr))
	g.Expect(body).To(ContainSubstring("the old rules stay in force"))
	saysSoon("the old rules stay in force:\n" + wantErr)

	// SIGUSR1 marks again: the old rules (3s) hold the next update.
	g.Expect(cmd.Process.Signal(syscall.SIGUSR1)).To(Succeed())
	g.Eventually(stderr.String).WithTimeout(5 * time.Second).Should(ContainSubstring("(by SIGUSR1): 1 rule(s) in force"))
	rv2 := update("fresh2")
	g.Consistently(seen).WithTimeout(time.Second).WithPolling(50*time.Millisecond).Should(Equal("fresh1"), "held again under the old rules")
	g.Eventually(seen).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal("fresh2"))

	// 3. SIGHUP reloads a good file under the same mark: a one-hour hold,
	// whereas the old rules' 3s window has ended.
	mustWrite(t, rules, holdFor("1h"))
	g.Expect(cmd.Process.Signal(syscall.SIGHUP)).To(Succeed())
	g.Eventually(stderr.String).WithTimeout(5 * time.Second).Should(ContainSubstring("reloaded 1 rule(s) from " + rules + "; in force under the mark of"))
	rv3 := update("fresh3")
	g.Consistently(seen).WithTimeout(1500*time.Millisecond).WithPolling(50*time.Millisecond).Should(Equal("fresh2"), "held by the reloaded rules")
	// GET /trace shows it held, not lost.
	g.Eventually(func() []trace.Event { return getTrace(t, addr).Events }).WithTimeout(5*time.Second).Should(ContainElement(And(
		HaveField("Name", "held"), HaveField("ResourceVersion", rv3), HaveField("Fate", trace.Pending), HaveField("Rule", 0),
	)), "GET /trace: the update held")

	// 4. SIGINT with an event still held: exit 0, the trace written, nothing
	// left running or lying around.
	g.Expect(cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	if err := wait(30 * time.Second); err != nil {
		t.Fatalf("stalefuzz proxy after SIGINT: want exit 0, got %v; stderr:\n%s", err, stderr.String())
	}
	stopInformer()
	factory.Shutdown()
	g.Eventually(func() error { return syscall.Kill(-pid, 0) }).WithTimeout(10*time.Second).Should(MatchError(syscall.ESRCH), "the command's process group is gone")
	g.Expect(reaper.Running(bin)).To(BeEmpty(), "no stalefuzz process survives")
	g.Expect(ls(t, tmp)).To(BeEmpty(), "what the command left in $TMPDIR")
	g.Expect(ls(t, out)).To(Equal([]string{"watcher.kubeconfig"}), "what the command left in --out")
	g.Expect(ls(t, traceDir)).To(Equal([]string{"trace.jsonl"}))
	t.Logf("stalefuzz proxy's output:\n%s", stderr.String())
	g.Expect(stderr.String()).To(ContainSubstring("stopping (SIGINT)"))
	g.Expect(stderr.String()).To(MatchRegexp(`trace of \d+ requests and \d+ watch events written to ` + tracePath))

	tr := readTraceFile(t, tracePath)
	event := func(rv string) trace.Event {
		for _, e := range tr.Events {
			if e.Client == "watcher" && e.Resource == "configmaps" && e.Namespace == ns && e.Name == "held" && e.ResourceVersion == rv {
				return e
			}
		}
		t.Fatalf("trace %s: no event of %s/held at resourceVersion %s in %+v", tracePath, ns, rv, tr.Events)
		return trace.Event{}
	}
	for _, rv := range []string{rv1, rv2} {
		e := event(rv)
		if e.Type != "MODIFIED" || e.Fate != trace.Released || e.Rule != 0 || e.Released.Sub(e.Arrived) < 2*time.Second {
			t.Errorf("trace %s: event of %s/held at resourceVersion %s: want MODIFIED, released by rule 0 at least 2s after it arrived, got %+v (held %v)",
				tracePath, ns, rv, e, e.Released.Sub(e.Arrived))
		}
	}
	if e := event(rv3); e.Fate != trace.Aborted || e.Rule != 0 {
		t.Errorf("trace %s: event of %s/held at resourceVersion %s: want aborted at the stop, held by rule 0, got %+v", tracePath, ns, rv3, e)
	}
	// client-go 0.37's informer starts with a WatchList watch (no list).
	g.Expect(tr.Requests).To(ContainElement(And(HaveField("Client", "watcher"), HaveField("Verb", "watch"), HaveField("Resource", "configmaps"), HaveField("Namespace", ns))), "the informer's watch")
	g.Expect(tr.Requests).To(ContainElement(And(
		HaveField("Client", "watcher"), HaveField("Verb", "patch"), HaveField("Resource", "configmaps"),
		HaveField("Namespace", ns), HaveField("Name", "other"), HaveField("Code", http.StatusOK), HaveField("SentRV", ""),
		HaveField("Write", HaveField("Patch", "merge")),
	)), "the merge patch through the proxy")

	// 5. report and audit of that trace. Until packages report and audit are
	// implemented, they say so; then their output must show the run.
	stdout, errOut, err := runBin(t, bin, "report", tracePath)
	htmlFile := htmlPath(tracePath)
	g.Expect(err).NotTo(HaveOccurred(), "stalefuzz report %s: %s", tracePath, errOut)
	g.Expect(stdout).To(Equal(htmlFile + "\n"))
	page, err := os.ReadFile(htmlFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(page)).To(ContainSubstring("<svg"))
	g.Expect(string(page)).To(ContainSubstring("trace.jsonl"), "the default title")
	g.Expect(string(page)).To(ContainSubstring("Blind-write audit"), "the audit section")
	g.Expect(string(page)).To(MatchRegexp(`<g class="band"[^>]*rule 0: hold configmaps`), "the hold's window, from the rules the trace recorded")
	g.Expect(string(page)).To(MatchRegexp(`<g class="event held"`), "the held events")
	other := filepath.Join(dir, "custom.html")
	stdout, errOut, err = runBin(t, bin, "report", tracePath, "-o", other, "--title", "a hold of 3s")
	g.Expect(err).NotTo(HaveOccurred(), "stalefuzz report -o: %s", errOut)
	g.Expect(stdout).To(Equal(other + "\n"))
	page, err = os.ReadFile(other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(page)).To(ContainSubstring("a hold of 3s"))

	stdout, errOut, err = runBin(t, bin, "audit", tracePath)
	g.Expect(err).NotTo(HaveOccurred(), "stalefuzz audit %s: %s", tracePath, errOut)
	t.Logf("stalefuzz audit %s:\n%s", tracePath, stdout)
	g.Expect(stdout).To(MatchRegexp(`watcher\s+\S+\s+patch\s+configmaps\s+merge patch\s+none\s+[1-9]`), "the audit table lists the watcher's blind merge patch")
	stdout, errOut, err = runBin(t, bin, "audit", "--json", tracePath)
	g.Expect(err).NotTo(HaveOccurred(), "stalefuzz audit --json %s: %s", tracePath, errOut)
	var rep audit.Report
	g.Expect(json.Unmarshal([]byte(stdout), &rep)).To(Succeed(), "audit --json output %q", stdout)
	g.Expect(rep.Rows).To(ContainElement(And(
		HaveField("Client", "watcher"), HaveField("Verb", "patch"), HaveField("Resource", "configmaps"),
		HaveField("Kind", "merge patch"), HaveField("Lock", "none"), HaveField("Writes", BeNumerically(">=", 1)),
	)), "the audit's row of the watcher's merge patch without a resourceVersion")
}

// runningCommand is the built command, running in a process group of its
// own that a reaper kills if the test dies, and that is killed on every exit
// path of the test.
type runningCommand struct {
	cmd    *exec.Cmd
	stderr syncBuffer // stdout too
	exited chan error

	waited  bool
	exitErr error
}

// startCommand starts bin with args and env (added to this process's), its
// reaper's directory under dir.
func startCommand(t testing.TB, bin, dir string, env []string, args ...string) *runningCommand {
	t.Helper()
	rp, err := reaper.New(mkdir(t, filepath.Join(dir, "reaper")))
	if err != nil {
		t.Fatalf("unable to start a reaper in %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := rp.Stop(); err != nil {
			t.Errorf("stop reaper: %v", err)
		}
	})
	rc := &runningCommand{cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	rc.cmd.Env = append(os.Environ(), env...)
	rc.cmd.Stdout, rc.cmd.Stderr = &rc.stderr, &rc.stderr
	if err := rp.Start(rc.cmd); err != nil {
		t.Fatalf("unable to start %s %s: %v", bin, strings.Join(args, " "), err)
	}
	pid := rc.cmd.Process.Pid
	go func() { rc.exited <- rc.cmd.Wait(); rp.Forget(pid) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = rc.wait(30 * time.Second)
	})
	return rc
}

// wait waits, within budget, for the command to exit, and returns how it
// exited.
func (rc *runningCommand) wait(budget time.Duration) error {
	if rc.waited {
		return rc.exitErr
	}
	select {
	case rc.exitErr = <-rc.exited:
		rc.waited = true
		return rc.exitErr
	case <-time.After(budget):
		return fmt.Errorf("still running after %v", budget)
	}
}

// buildCommand builds the command into a temporary directory.
func buildCommand(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "stalefuzz")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -o %s .: %v\n%s", bin, err, b)
	}
	return bin
}

// runBin runs a short-lived subcommand with a budget, in a process group of
// its own that is killed if it overruns.
func runBin(t *testing.T, bin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	return o.String(), e.String(), err
}

// writeAdminKubeconfig writes cfg as a kubeconfig whose current context,
// "elsewhere", names no reachable server, and whose context "envtest" is
// cfg: the command must honour --context.
// startControlPlane starts a control plane for one test, stopped when it
// ends, and writes its admin kubeconfig (context "envtest") into the test's
// temporary directory.
func startControlPlane(t testing.TB) (cp *controlplane.Environment, kubeconfig string) {
	t.Helper()
	cp = &controlplane.Environment{}
	if err := cp.Start(); err != nil {
		t.Fatalf("unable to start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	kubeconfig = filepath.Join(t.TempDir(), "admin.kubeconfig")
	writeAdminKubeconfig(t, cp.Config, kubeconfig)
	return cp, kubeconfig
}

func writeAdminKubeconfig(t testing.TB, cfg *rest.Config, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.Clusters["elsewhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "elsewhere", AuthInfo: "admin"}
	kc.CurrentContext = "elsewhere"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// waitControl waits (30s at most) for out/control.addr, which the command
// writes last, and returns the address; it fails at once if the command
// ends first.
func waitControl(t testing.TB, out string, exited <-chan error, stderr *syncBuffer) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(filepath.Join(out, "control.addr")); err == nil {
			return strings.TrimSpace(string(b))
		}
		select {
		case err := <-exited:
			t.Fatalf("stalefuzz proxy ended before writing %s/control.addr: %v; stderr:\n%s", out, err, stderr.String())
		case <-deadline:
			t.Fatalf("no %s/control.addr within 30s; stderr:\n%s", out, stderr.String())
		case <-tick.C:
		}
	}
}

var controlClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func post(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := controlClient.Post("http://"+addr+path, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func do(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := controlClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func getTrace(t *testing.T, addr string) trace.Trace {
	t.Helper()
	resp, err := controlClient.Get("http://" + addr + "/trace")
	if err != nil {
		t.Fatalf("GET /trace: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/jsonl" {
		t.Fatalf("GET /trace: want 200 application/jsonl, got %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	tr, err := trace.ReadJSONL(resp.Body)
	if err != nil {
		t.Fatalf("GET /trace: %v", err)
	}
	return tr
}

func readTraceFile(t *testing.T, path string) trace.Trace {
	t.Helper()
	tr, err := readTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// ls lists a directory's entries, sorted.
func ls(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func mkdir(t testing.TB, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// syncBuffer is a bytes.Buffer that a process's output and a test's reads
// can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
