package longrun_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/fuzz/longrun"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

func TestMain(m *testing.M) { os.Exit(fuzz.Main(m)) }

// lateAt is when the late scenario's workload writes: past go test -fuzz's
// 10 s per input, and past what an execution of fuzz.Budget may take
// outside a go test -fuzz worker (its start may take fuzz.StartSlack times
// its budget there, and the execution's budget grows by as much: 17 s).
const lateAt = 18 * time.Second

// late is a scenario whose workload writes a ConfigMap lateAt after the
// mark, and whose check calls that write a violation: only an execution
// that lasts longer than go test -fuzz allows one input can show it.
func late() fuzz.Scenario {
	return fuzz.Scenario{
		Name:  "longrun-late",
		Long:  16 * time.Second,
		Knobs: []fuzz.Knob{{Name: "value", Values: 2}},
		Start: func(context.Context, *fuzz.Exec) error { return nil },
		Drive: func(_ context.Context, x *fuzz.Exec) error {
			x.After(lateAt, "late write", func(ctx context.Context) error {
				return x.Direct.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: x.Namespace},
					Data:       map[string]string{"value": fmt.Sprint(x.Knob("value"))},
				})
			})
			return nil
		},
		Checks: []fuzz.Check{{Name: "late", Fn: func(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
			var cm corev1.ConfigMap
			err := x.Direct.Get(ctx, client.ObjectKey{Namespace: x.Namespace, Name: "late"}, &cm)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("ConfigMap late written at t+%v with value %s", lateAt, cm.Data["value"])
		}}},
	}
}

// TestCampaignReachesPastTenSeconds runs a long campaign from a corpus
// directory holding one entry: that entry runs first, its execution
// reaches the workload's write at t+18 s (an execution go test -fuzz
// would have killed, and one of fuzz.Budget could not reach), and the campaign ends at that finding with its
// corpus entry written in Go's format, named as go test names it.
func TestCampaignReachesPastTenSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("a control plane and executions of 19 s")
	}
	dir := t.TempDir()
	t.Setenv("STALEFUZZ_FINDINGS", filepath.Join(dir, "findings"))
	t.Setenv("STALEFUZZ_CAMPAIGN", filepath.Join(dir, "campaign"))
	t.Setenv(fuzz.SearchOnEnv, "")
	s := late()
	corpus := filepath.Join(dir, "corpus")
	if err := os.MkdirAll(corpus, 0o700); err != nil {
		t.Fatal(err)
	}
	first := s.Encode(fuzz.Schedule{Knobs: map[string]int{"value": 1}})
	if err := os.WriteFile(filepath.Join(corpus, fuzz.CorpusEntryName(first)), fuzz.MarshalCorpusEntry(first), 0o600); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	sum, err := longrun.Campaign{Target: "FuzzLate", Corpus: corpus, Time: 3 * time.Minute, Progress: &progress}.Run(context.Background(), s)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Findings) != 1 || sum.Executions != 1 {
		t.Fatalf("want the campaign to end at the first execution's finding, got %d findings in %d executions (%d harness errors): %+v", len(sum.Findings), sum.Executions, sum.HarnessErrors, sum)
	}
	f := sum.Findings[0]
	if !strings.Contains(f.Report, "ConfigMap late written at t+18s with value 1") {
		t.Errorf("the finding is not the late write's:\n%s", f.Report)
	}
	if !bytes.Equal(f.Input, first) || !strings.Contains(f.Origin, "the corpus entry "+corpus) {
		t.Errorf("the finding's input %x from %q, want the corpus entry's %x", f.Input, f.Origin, first)
	}
	if in, err := fuzz.ReadCorpusEntry(f.Entry); err != nil || !bytes.Equal(in, first) || f.EntryName != fuzz.CorpusEntryName(first) {
		t.Errorf("the finding's corpus entry %s (%s): %x, %v; want %x named %s", f.Entry, f.EntryName, in, err, first, fuzz.CorpusEntryName(first))
	}
	msg := f.Message("FuzzLate", f.Input)
	if !strings.Contains(msg, "testdata/fuzz/FuzzLate/"+f.EntryName) {
		t.Errorf("the finding's message gives no regression row under testdata/fuzz/FuzzLate:\n%s", msg)
	}
	if !strings.Contains(progress.String(), "fuzz: elapsed: ") {
		t.Errorf("no progress line in go test -fuzz's words:\n%s", progress.String())
	}
	ents, _ := os.ReadDir(corpus)
	if len(ents) != 1 || ents[0].Name() != fuzz.CorpusEntryName(first) {
		t.Errorf("the corpus holds %v, want its one entry (interesting, already there)", ents)
	}
	if n, _, _ := fuzz.Stats(filepath.Join(dir, "campaign")); n != 1 {
		t.Errorf("the campaign directory's stats count %d executions, want 1", n)
	}
}

// TestMutate: every mutation differs from its input and is at most
// MaxInput bytes, from any input, the empty one and a full one included.
func TestMutate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	full := bytes.Repeat([]byte{0xff}, longrun.MaxInput)
	for i := 0; i < 20000; i++ {
		var in []byte
		switch i % 3 {
		case 0:
			in = nil
		case 1:
			in = full
		default:
			in = make([]byte, r.IntN(40))
			for k := range in {
				in[k] = byte(r.IntN(256))
			}
		}
		out := longrun.Mutate(r, in, [][]byte{{1, 2, 3}, nil, full[:7]})
		if bytes.Equal(out, in) || len(out) > longrun.MaxInput {
			t.Fatalf("mutation %d of %x: %x (%d bytes)", i, in, out, len(out))
		}
	}
}
