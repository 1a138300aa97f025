package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// runIn runs the command line in this process and returns its exit status,
// stdout and stderr.
func runIn(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy"}, "stalefuzz: required: --kubeconfig, --rules, --trace, --client\nRun 'stalefuzz proxy --help' for usage.\n"},
		{[]string{"proxy", "--kubeconfig", "k", "--rules", "r", "--trace", "t", "--client", "a,b", "--client", "a"}, `--client "a" given twice`},
		{[]string{"proxy", "--kubeconfig", "k", "--rules", "r", "--trace", "t", "--client", "../x"}, `--client "../x": want letters, digits`},
		{[]string{"proxy", "--kubeconfig", "k", "--rules", "r", "--trace", "t", "--client", "a", "--control", "0.0.0.0:0"}, `--control "0.0.0.0:0": the control endpoint listens on a loopback address only`},
		{[]string{"proxy", "--kubeconfig", "k", "--rules", "r", "--trace", "t", "--client", "a", "--control", ":8080"}, `--control ":8080": the control endpoint listens on a loopback address only`},
		{[]string{"proxy", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"proxy", "extra"}, `proxy takes no arguments; got ["extra"]`},
		{[]string{"bogus"}, `unknown command "bogus" for "stalefuzz"`},
		{[]string{"report"}, "report takes one argument, TRACE; got 0"},
		{[]string{"audit", "a", "b"}, "audit takes one argument, TRACE; got 2"},
	} {
		code, stdout, stderr := runIn(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("stalefuzz %q: want status 2, stderr containing %q and no stdout; got %d, stderr %q, stdout %q", tc.args, tc.want, code, stderr, stdout)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("usage errors left files in %s: %v", dir, entries)
	}
}

// A proxy that cannot start says why, and leaves nothing behind: no output
// directory, no kubeconfig, no trace.
func TestProxyFailedStartLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	mustWrite(t, rules, "rules:\n  - client: a\n    action: hold\n")
	out := filepath.Join(dir, "out")
	args := []string{"proxy", "--kubeconfig", filepath.Join(dir, "missing.kubeconfig"), "--client", "a",
		"--rules", rules, "--trace", filepath.Join(dir, "trace.jsonl"), "--out", out}

	code, _, stderr := runIn(args...)
	want := rules + ":2: rule 1: hold needs a window end (To)"
	if code != 1 || !strings.Contains(stderr, "unable to read rules:\n"+want) {
		t.Errorf("bad rules file: want status 1 and %q, got %d, %q", want, code, stderr)
	}

	mustWrite(t, rules, "rules:\n  - client: a\n    action: hold\n    to: 1s\n")
	code, _, stderr = runIn(args...)
	if code != 1 || !strings.Contains(stderr, "unable to load kubeconfig "+filepath.Join(dir, "missing.kubeconfig")) {
		t.Errorf("missing kubeconfig: want status 1 and a message naming it, got %d, %q", code, stderr)
	}

	args[len(args)-3] = filepath.Join(dir, "no-such-dir", "trace.jsonl")
	code, _, stderr = runIn(args...)
	if code != 1 || !strings.Contains(stderr, "unable to write the trace to "+args[len(args)-3]) {
		t.Errorf("unwritable trace: want status 1 and a message naming it, got %d, %q", code, stderr)
	}

	// A start that fails late (the control endpoint's port is taken) removes
	// the trace file it had created, the kubeconfigs and --out.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere"}
	kc.CurrentContext = "nowhere"
	kubeconfig := filepath.Join(t.TempDir(), "nowhere.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runIn("proxy", "--kubeconfig", kubeconfig, "--client", "a", "--rules", rules,
		"--trace", filepath.Join(dir, "trace.jsonl"), "--out", out, "--control", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "unable to listen for the control endpoint on "+ln.Addr().String()) {
		t.Errorf("control port taken: want status 1 and a message naming it, got %d, %q", code, stderr)
	}

	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "rules.yaml" {
		t.Errorf("failed starts left behind in %s: %v (want only rules.yaml)", dir, names)
	}
}

func TestReadTraceErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.jsonl")
	for _, cmd := range []string{"report", "audit"} {
		code, _, stderr := runIn(cmd, missing)
		if code != 1 || !strings.Contains(stderr, "unable to read trace: open "+missing) {
			t.Errorf("stalefuzz %s %s: want status 1 and a message naming the file, got %d, %q", cmd, missing, code, stderr)
		}
	}
	bad := filepath.Join(dir, "bad.jsonl")
	mustWrite(t, bad, "{\"request\":{}}\nnot json\n")
	code, _, stderr := runIn("audit", bad)
	if code != 1 || !strings.Contains(stderr, "unable to read trace "+bad+": unable to read trace entry 2") {
		t.Errorf("stalefuzz audit %s: want status 1 and the entry that is not JSON, got %d, %q", bad, code, stderr)
	}
	if _, err := os.Stat(htmlPath(bad)); !os.IsNotExist(err) {
		t.Errorf("a failed report left %s", htmlPath(bad))
	}
}

// TestReportIsPrivate: the picture of a trace holds what the trace holds, so
// it is written 0600, as the trace is.
func TestReportIsPrivate(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "run.jsonl")
	mustWrite(t, tr, `{"request":{"client":"c","verb":"get","resource":"configmaps","start":"2026-11-21T12:00:00Z","latency":1000,"code":200}}`+"\n")
	if code, _, stderr := runIn("report", tr); code != 0 {
		t.Fatalf("stalefuzz report %s: status %d, %s", tr, code, stderr)
	}
	fi, err := os.Stat(htmlPath(tr))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("stalefuzz report %s: %s has mode %#o, want 0600", tr, htmlPath(tr), m)
	}
}

func TestHTMLPath(t *testing.T) {
	for in, want := range map[string]string{
		"trace.jsonl":         "trace.html",
		"/a/b.c/run.jsonl":    "/a/b.c/run.html",
		"trace":               "trace.html",
		"trace.json":          "trace.json.html",
		"dir.jsonl/run.jsonl": "dir.jsonl/run.html",
	} {
		if got := htmlPath(in); got != want {
			t.Errorf("htmlPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:0":    "127.0.0.1:0",
		"localhost:8080": "127.0.0.1:8080",
		"[::1]:9":        "[::1]:9",
		"127.0.0.2:1":    "127.0.0.2:1",
	} {
		if got, err := loopbackAddr(in); err != nil || got != want {
			t.Errorf("loopbackAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"0.0.0.0:0", ":0", "10.0.0.1:80", "example.com:80", "127.0.0.1"} {
		if got, err := loopbackAddr(in); err == nil {
			t.Errorf("loopbackAddr(%q) = %q; want an error", in, got)
		}
	}
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// quietLogChild makes this test binary, run as a child, the command's
// process as main starts it, using controller-runtime's logger late.
const quietLogChild = "STALEFUZZ_TEST_QUIETLOG_CHILD"

// TestQuietLogNoStack runs this test binary as a child that does what main
// does first (quietLog) and then logs through controller-runtime's global
// logger 31 s after it began, as envtest's CRD reading does after a
// target's first build: no "log.SetLogger(...) was never called" stack.
// Without quietLog the child prints it. It takes about 31 s.
func TestQuietLogNoStack(t *testing.T) {
	if os.Getenv(quietLogChild) != "" {
		quietLog()
		<-time.After(31 * time.Second)
		ctrllog.Log.Info("late")
		fmt.Println("logged late")
		return
	}
	if testing.Short() {
		t.Skip("waits 31 s for controller-runtime's deadline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestQuietLogNoStack$", "-test.count=1")
	cmd.Env = append(os.Environ(), quietLogChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "logged late") {
		t.Fatalf("child logging 31 s after its start: err %v; output:\n%s", err, out)
	}
	if strings.Contains(string(out), "was never called") {
		t.Errorf("child logging 31 s after its start, after quietLog: controller-runtime printed its stack:\n%s", out)
	}
}
