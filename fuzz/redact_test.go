package fuzz

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestFindingHoldsNoSecretAndIsPrivate: a finding of an execution that wrote
// a Secret (its trace, picture and corpus entry, with the stats and the
// harness-error log beside them) holds none of the Secret's values, and
// every file of the findings directory is 0600 in directories of 0700. It
// starts a control plane of its own: about 10 s in all (17 s on a loaded
// machine), most of it the control plane's start and the warm-up execution.
func TestFindingHoldsNoSecretAndIsPrivate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	planted := "planted" + hex.EncodeToString(b) + "x"
	forms := []string{planted, base64.StdEncoding.EncodeToString([]byte(planted))}

	s := Scenario{
		Name:        "redact",
		Clients:     []string{"writer"},
		Resources:   []string{"secrets"},
		LostUpdates: []string{"data.password"},
		Fields:      []string{"data", "stringData"},
		Start:       func(context.Context, *Exec) error { return nil },
		Drive: func(ctx context.Context, x *Exec) error {
			cfg, err := x.Config("writer")
			if err != nil {
				return err
			}
			cfg.ContentType = "application/json" // so that the trace records Fields from the answers
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			secrets := cs.CoreV1().Secrets(x.Namespace)
			sec, err := secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s"},
				StringData: map[string]string{"password": planted},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("unable to create secret %s/s: %w", x.Namespace, err)
			}
			sec.Data["password"] = []byte(planted + "2")
			if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("unable to update secret %s/s: %w", x.Namespace, err)
			}
			return nil
		},
		Checks: []Check{{Name: "always", Fn: func(_ context.Context, x *Exec, _ trace.Trace) error {
			return fmt.Errorf("secret %s/s: this check always fails, so that the execution is a finding", x.Namespace)
		}}},
	}
	forms = append(forms, planted+"2", base64.StdEncoding.EncodeToString([]byte(planted+"2")))
	env := testEnv(t, s)
	sched := Schedule{Knobs: map[string]int{}}
	res, err := env.Run(context.Background(), sched, Retries(3))
	if err != nil {
		t.Fatalf("schedule %s: %v", sched, err)
	}
	if len(res.Violations) == 0 {
		t.Fatalf("schedule %s: want the check's violation, got none", sched)
	}
	wrote := 0
	for _, r := range res.Trace.Requests {
		if r.Resource == "secrets" && r.Write != nil && len(r.Write.Set) > 0 && len(r.Fields) > 0 {
			wrote++
		}
	}
	if wrote != 2 {
		t.Fatalf("schedule %s: want the create and the update of secret %s/s in the trace, with what they set and their answers' fields; got %d", sched, res.Namespace, wrote)
	}

	dir := filepath.Join(t.TempDir(), "findings")
	t.Setenv("STALEFUZZ_FINDINGS", dir)
	input := s.Encode(sched)
	written := writeFinding(res, s.Name, input, "")
	if written.entryErr != nil {
		t.Fatalf("corpus entry: %v", written.entryErr)
	}
	tracePath, picture, entry := written.trace, written.picture, written.entry
	writeStats(s.Name, env.Ready, 1, 1, 0, time.Second, res.Phases)
	logHarnessError(s.Name, sched, errors.New("a harness error"))
	for _, p := range []string{tracePath, picture, entry} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("finding file: %v", err)
		}
	}

	// What a finding prints, and every file and directory it wrote.
	if leaked := leakedForms(res.Report(), forms); leaked != "" {
		t.Errorf("the finding's report holds %s", leaked)
	}
	files := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if m := info.Mode().Perm(); m != 0o700 {
				t.Errorf("findings directory %s: want mode 0700, got %#o", path, m)
			}
			return nil
		}
		files++
		if m := info.Mode().Perm(); m != 0o600 {
			t.Errorf("finding file %s: want mode 0600, got %#o", path, m)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if leaked := leakedForms(html.UnescapeString(string(b)), forms); leaked != "" {
			t.Errorf("finding file %s holds %s", path, leaked)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("unable to read findings directory %s: %v", dir, err)
	}
	if files < 5 { // trace, picture, corpus entry, stats, harness errors
		t.Errorf("findings directory %s: want at least 5 files, got %d", dir, files)
	}
}

// leakedForms names the first of forms, any 12 consecutive characters of
// which are found in s (a value cut short still counts), as it reads there.
func leakedForms(s string, forms []string) string {
	for _, f := range forms {
		for i := 0; i+12 <= len(f); i++ {
			if j := strings.Index(s, f[i:i+12]); j >= 0 {
				return fmt.Sprintf("%q (of %q): …%s…", f[i:i+12], f, s[max(0, j-80):min(len(s), j+80)])
			}
		}
	}
	return ""
}
