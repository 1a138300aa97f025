package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// traceMemoryEnv selects TestTraceMemory and says for how long it runs
// ("30m"); hack/trace-memory.sh sets it.
const traceMemoryEnv = "STALEFUZZ_TRACE_MEMORY"

// procMemory is what a process of this machine takes: its resident set
// (from /proc) and, for a Go program run with GODEBUG=gctrace=1, its live
// heap after the last garbage collection (from the last gctrace line of its
// stderr).
type procMemory struct {
	RSS, Heap int64 // bytes; Heap -1 when no collection has been traced yet
}

func (m procMemory) String() string {
	heap := "?"
	if m.Heap >= 0 {
		heap = fmt.Sprintf("%d MB", m.Heap>>20)
	}
	return fmt.Sprintf("RSS %.1f MB, heap %s", float64(m.RSS)/(1<<20), heap)
}

// gcLine is a gctrace line: "gc 7 @1.2s 0%: ... ms cpu, 4->4->2 MB, 5 MB goal, ...".
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @[^\n]*?, (\d+)->(\d+)->(\d+) MB, `)

// memoryOf reads pid's resident set and the live heap of the last gctrace
// line in stderr.
func memoryOf(pid int, stderr string) (procMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, fmt.Errorf("unable to read the memory of process %d: %w", pid, err)
	}
	m := procMemory{Heap: -1}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return procMemory{}, fmt.Errorf("unable to read the memory of process %d: VmRSS %q: %w", pid, rest, err)
			}
			m.RSS = kb << 10
		}
	}
	if all := gcLine.FindAllStringSubmatch(stderr, -1); len(all) > 0 {
		mb, _ := strconv.ParseInt(all[len(all)-1][3], 10, 64)
		m.Heap = mb << 20
	}
	return m, nil
}

// TestTraceMemory is a figure, not an assertion: two stalefuzz proxy
// commands in front of one apiserver, one writing its trace as it grows
// (the default) and one keeping it in memory (--trace-in-memory), each with
// one informer watching 100 ConfigMaps that are updated 100 times a second
// in all, for STALEFUZZ_TRACE_MEMORY (e.g. 30m). Every minute it prints
// each proxy's RSS and live Go heap, the events its informer got and the
// size of the bounded trace file. hack/trace-memory.sh runs it.
func TestTraceMemory(t *testing.T) {
	budget, err := time.ParseDuration(os.Getenv(traceMemoryEnv))
	if err != nil || budget <= 0 {
		t.Skipf("a figure that runs for $%s (e.g. 30m; got %q): hack/trace-memory.sh", traceMemoryEnv, os.Getenv(traceMemoryEnv))
	}
	const objects, rate, sample = 100, 100, time.Minute
	ctx := t.Context()
	cp, kubeconfig := startControlPlane(t)
	dir := t.TempDir()
	direct := kubernetes.NewForConfigOrDie(cp.Config)
	const ns = "stalefuzz-trace-memory"
	if _, err := direct.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("unable to create namespace %s: %v", ns, err)
	}
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"n": "0"}}
		if _, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("unable to create configmap %s/%s: %v", ns, cm.Name, err)
		}
	}
	bin := buildCommand(t)
	rules := filepath.Join(dir, "rules.yaml")
	mustWrite(t, rules, "rules: []\n")

	type run struct {
		name   string
		rc     *runningCommand
		trace  string
		events atomic.Int64
	}
	var runs []*run
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"bounded", nil}, {"in-memory", []string{"--trace-in-memory"}}} {
		d := mkdir(t, filepath.Join(dir, mode.name))
		r := &run{name: mode.name, trace: filepath.Join(d, "trace.jsonl")}
		args := append([]string{"proxy", "--kubeconfig", kubeconfig, "--context", "envtest", "--client", "watcher",
			"--rules", rules, "--trace", r.trace, "--out", filepath.Join(d, "out")}, mode.flags...)
		r.rc = startCommand(t, bin, d, []string{"GODEBUG=gctrace=1"}, args...)
		waitControl(t, filepath.Join(d, "out"), r.rc.exited, &r.rc.stderr)
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(d, "out", "watcher.kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, informers.WithNamespace(ns))
		inf := factory.Core().V1().ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(any, any) { r.events.Add(1) }}); err != nil {
			t.Fatal(err)
		}
		informerCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		t.Cleanup(func() { stop(); factory.Shutdown() })
		factory.Start(informerCtx.Done())
		syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ok := toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced)
		cancel()
		if !ok {
			t.Fatalf("%s: the informer did not sync within 30s", mode.name)
		}
		runs = append(runs, r)
	}

	// 100 updates a second, round robin, by 4 writers; an update due while
	// the writers are a second behind is skipped, and counted.
	var updates, failed, late atomic.Int64
	jobs := make(chan int, rate)
	var writers sync.WaitGroup
	for range 4 {
		writers.Go(func() {
			for i := range jobs {
				patch := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)
				if _, err := direct.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%03d", i%objects), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					failed.Add(1)
					continue
				}
				updates.Add(1)
			}
		})
	}
	t.Logf("%d ConfigMaps updated %d times a second, for %v; sampled every %v", objects, rate, budget, sample)
	t.Logf("%-7s %-9s %9s %9s %8s %12s %12s", "minute", "proxy", "RSS MB", "heap MB", "events", "trace file", "updates")
	start := time.Now()
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	next := start.Add(min(sample, budget))
	for i := 0; ; {
		<-tick.C
		// As many as are due since the start: a tick the ticker dropped (a
		// busy machine) is made up at the next.
		for due := int(time.Since(start).Seconds() * rate); i < due; i++ {
			select {
			case jobs <- i:
			default:
				late.Add(1)
			}
		}
		if time.Now().Before(next) {
			continue
		}
		for _, r := range runs {
			m, err := memoryOf(r.rc.cmd.Process.Pid, r.rc.stderr.String())
			if err != nil {
				t.Fatal(err)
			}
			file := "-"
			if fi, err := os.Stat(r.trace); err == nil {
				file = fmt.Sprintf("%.1f MB", float64(fi.Size())/(1<<20))
			}
			t.Logf("%-7.0f %-9s %9.1f %9d %8d %12s %12d", time.Since(start).Minutes(), r.name, float64(m.RSS)/(1<<20), m.Heap>>20, r.events.Load(), file, updates.Load())
		}
		if time.Since(start) >= budget {
			break
		}
		if next = next.Add(sample); next.After(start.Add(budget)) {
			next = start.Add(budget)
		}
	}
	close(jobs)
	writers.Wait()
	t.Logf("%d updates in %v (%.1f/s), %d failed, %d skipped (the writers were behind)", updates.Load(), time.Since(start).Round(time.Second),
		float64(updates.Load())/time.Since(start).Seconds(), failed.Load(), late.Load())
	for _, r := range runs {
		if err := r.rc.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := r.rc.wait(2 * time.Minute); err != nil {
			t.Fatalf("%s: stalefuzz proxy after SIGINT: %v; output:\n%s", r.name, err, tail(r.rc.stderr.String(), 20))
		}
		fi, err := os.Stat(r.trace)
		if err != nil {
			t.Fatal(err)
		}
		summary := regexp.MustCompile(`stalefuzz: trace of .*`).FindString(r.rc.stderr.String())
		t.Logf("%s: %s (%.1f MB)", r.name, summary, float64(fi.Size())/(1<<20))
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := bytes.Split([]byte(s), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}
