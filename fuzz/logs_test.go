package fuzz

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestControllersLogIsKeptRedactedAndSaved: what an in-process manager's
// reconciler logs (a plain line, a line holding a JSON Web Token, one
// holding a PEM private key, and the error controller-runtime logs for it)
// and what an out-of-process controller writes to the output it was not
// given are in the execution's log, named by client; a child's output the
// caller redirected itself is not; no credential reaches the log, the
// report or the finding's .log file, which is 0600.
func TestControllersLogIsKeptRedactedAndSaved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	marker := "marker" + hex.EncodeToString(b)
	_, _ = rand.Read(b) // the secrets share no characters with the marker
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	sig := "sig" + hex.EncodeToString(b) + "nature"
	jwt := enc(`{"alg":"RS256"}`) + "." + enc(`{"sub":"system:serviceaccount:x:y"}`) + "." + sig
	keyBody := "MIIEkeybody" + hex.EncodeToString(b) + "keybody"
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + keyBody + "\n-----END RSA PRIVATE KEY-----"
	secrets := []string{jwt, sig, keyBody}
	own := filepath.Join(t.TempDir(), "own")

	s := Scenario{
		Name:      "logs",
		Clients:   []string{"ctl"},
		Resources: []string{"configmaps"},
		Start: func(ctx context.Context, x *Exec) error {
			f, err := os.Create(own)
			if err != nil {
				return err
			}
			defer f.Close()
			// stdout left to the execution's log, stderr the caller's.
			cmd := exec.Command("/bin/sh", "-c", `echo "child says `+marker+`"; echo "child token `+jwt+`"; echo "child's own stderr" >&2; printf "child unfinished"; exec sleep 60`)
			cmd.Stderr = f
			if err := x.Command("child", cmd); err != nil {
				return err
			}
			return x.StartManager(ctx, "ctl", func(mgr manager.Manager) error {
				return builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("logger").Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					l := log.FromContext(ctx)
					l.Info("reconciling "+marker, "token", jwt)
					l.Info("found a key", "key", pem)
					return reconcile.Result{}, fmt.Errorf("failing %s on purpose", marker)
				}))
			})
		},
		Drive: func(ctx context.Context, x *Exec) error {
			return x.Direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: x.Namespace, Name: "c"}})
		},
		Checks: []Check{{Name: "logged", Fn: func(ctx context.Context, x *Exec, _ trace.Trace) error {
			// Wait until both clients logged their marker and the
			// reconciler's error was logged.
			return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				var n int
				for _, l := range x.logs.logs().Lines {
					if strings.Contains(l.Text, marker) && (l.Client == "child" || strings.HasPrefix(l.Text, "ERROR ")) {
						n++
					}
				}
				return n >= 2, nil
			})
		}}},
	}
	env := testEnv(t, s)
	res, err := env.Run(context.Background(), Schedule{}, Within(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}

	var text strings.Builder
	if err := res.Logs.WriteTo(&text, res.Mark); err != nil {
		t.Fatal(err)
	}
	log := text.String()
	for _, want := range []string{
		"child: child says " + marker,
		"child: child unfinished",
		"ctl: reconciling " + marker,
		"ctl: ERROR Reconciler error",
		"failing " + marker + " on purpose",
		"token=redacted:",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the execution's log has no %q; it is:\n%s", want, log)
		}
	}
	if strings.Contains(log, "own stderr") {
		t.Errorf("the execution's log holds what the child wrote to the stderr its caller gave it:\n%s", log)
	}
	if got, _ := os.ReadFile(own); !strings.Contains(string(got), "own stderr") {
		t.Errorf("the stderr the caller gave the child: got %q, want its line", got)
	}
	if leaked := leakedForms(log, secrets); leaked != "" {
		t.Errorf("the execution's log holds %s:\n%s", leaked, log)
	}
	if leaked := leakedForms(res.Report(), secrets); leaked != "" {
		t.Errorf("the report holds %s", leaked)
	}

	dir := filepath.Join(t.TempDir(), "findings")
	t.Setenv("STALEFUZZ_FINDINGS", dir)
	files := writeFinding(res, s.Name, s.Encode(Schedule{}), "")
	info, err := os.Stat(files.logs)
	if err != nil {
		t.Fatalf("the finding's controllers' log: %v", err)
	}
	if m := info.Mode().Perm(); m != 0o600 {
		t.Errorf("%s: want mode 0600, got %#o", files.logs, m)
	}
	saved, err := os.ReadFile(files.logs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), "reconciling "+marker) {
		t.Errorf("%s has no line of the reconciler:\n%s", files.logs, saved)
	}
	if leaked := leakedForms(string(saved), secrets); leaked != "" {
		t.Errorf("%s holds %s", files.logs, leaked)
	}
}

// TestLogsKeepTheLastLinesOfEachClient: a client that logs more than
// MaxLogLines lines keeps its latest and counts the rest, without costing
// another client its lines.
func TestLogsKeepTheLastLinesOfEachClient(t *testing.T) {
	var l execLog
	l.add("quiet", "first")
	for i := range MaxLogLines + 7 {
		l.add("loud", fmt.Sprintf("line %d", i))
	}
	got := l.logs()
	if got.Dropped["loud"] != 7 || got.Dropped["quiet"] != 0 {
		t.Errorf("dropped: %v, want loud's first 7 only", got.Dropped)
	}
	if last := got.Last("loud", 1); len(last) != 1 || last[0].Text != fmt.Sprintf("line %d", MaxLogLines+6) {
		t.Errorf("loud's last line: %v", last)
	}
	if first := got.Last("quiet", 5); len(first) != 1 || first[0].Text != "first" {
		t.Errorf("quiet's lines: %v, want [first]", first)
	}
	if n := len(got.Lines); n != MaxLogLines+1 {
		t.Errorf("lines kept: %d, want %d", n, MaxLogLines+1)
	}
	var b strings.Builder
	if err := got.WriteTo(&b, time.Time{}); err != nil || !strings.Contains(b.String(), "# loud: 7 earlier lines dropped") {
		t.Errorf("written: err %v, want the dropped count first:\n%.200s", err, b.String())
	}
}
