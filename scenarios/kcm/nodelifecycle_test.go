package kcm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
	"github.com/stalefuzz/stalefuzz/scenarios/kcm"
)

// nodeEnv is the node lifecycle Env with the gate off or on, started on
// first use, kept with the suite's others (stopped by its AfterSuite).
func nodeEnv(gate bool) *fuzz.Env {
	GinkgoHelper()
	key := fmt.Sprint("nodelifecycle ", gate)
	if e := envs[key]; e != nil {
		return e
	}
	e, err := fuzz.NewEnv(kcm.NodeLifecycle(gate))
	Expect(err).NotTo(HaveOccurred())
	envs[key] = e
	return e
}

func runNodes(gate bool, s fuzz.Schedule) *fuzz.Result {
	GinkgoHelper()
	res, err := nodeEnv(gate).Run(context.Background(), s, fuzz.Retries(3))
	Expect(err).NotTo(HaveOccurred(), "schedule %s", s)
	return res
}

// nodeStep is one step on kube-controller-manager for the longest window.
func nodeStep(die int, st fuzz.Step) fuzz.Schedule {
	st.Client = kcm.Client
	if st.Length == 0 {
		st.Length = kcm.Bounds.MaxLagEnd
		if st.IsFault() {
			st.Length = kcm.Bounds.MaxFaultEnd
		}
	}
	return fuzz.Schedule{Knobs: map[string]int{"die": die}, Steps: []fuzz.Step{st}}
}

var _ = Describe("node lifecycle controller: Lease events held for longer than the grace period", func() {
	held := func(die int) fuzz.Schedule {
		return nodeStep(die, fuzz.Step{Resource: "leases", Action: proxy.Hold, Start: 0, Length: 2500 * time.Millisecond})
	}
	It("with "+kcm.LeaseGate+" off, marks a live node Unknown", func() {
		res := runNodes(false, held(0))
		Expect(res.Violations).To(ContainElement(SatisfyAll(
			HaveField("Oracle", "live-node-unknown"),
			HaveField("Message", ContainSubstring("node node-a: Ready=Unknown")),
		)), res.Report())
	})
	It("with it on, waits for its cache: no live node marked, the dead one marked", func() {
		res := runNodes(true, held(1))
		Expect(res.Violations).To(BeEmpty(), res.Report())
		gets := 0
		for _, r := range res.Trace.Requests {
			if r.Client == kcm.Client && r.Verb == "get" && r.Resource == "leases" && r.Namespace == "kube-node-lease" {
				gets++
			}
		}
		Expect(gets).To(BeNumerically(">", 0), "the gate reads the Lease from the apiserver when its cached one looks expired: %s", res.Report())
	})
})

// The node lifecycle truth table is opt-in (STALEFUZZ_NODE_TRUTH_TABLE=FILE
// writes it; `make truth-table-nodelifecycle`): each pattern 3 times with
// the gate off and on.
var _ = Describe("node lifecycle truth table", Label("truth-table"), func() {
	It("runs every pattern with the gate off and on", func() {
		out := os.Getenv("STALEFUZZ_NODE_TRUTH_TABLE")
		if out == "" {
			Skip("set STALEFUZZ_NODE_TRUTH_TABLE=FILE to run the node lifecycle truth table (make truth-table-nodelifecycle)")
		}
		const runs = 3
		type pattern struct {
			name string
			st   fuzz.Step
		}
		long := 2500 * time.Millisecond
		ps := []pattern{
			{"no fault", fuzz.Step{}},
			{"Lease events delayed by 0.1 s", fuzz.Step{Resource: "leases", Action: proxy.Delay, Delay: kcm.Bounds.MaxDelay, Length: long}},
			{"Lease events held for 0.8 s (under the grace period)", fuzz.Step{Resource: "leases", Action: proxy.Hold, Length: 800 * time.Millisecond}},
			{"Lease events held for 2.5 s", fuzz.Step{Resource: "leases", Action: proxy.Hold, Length: long}},
			{"Lease events held for 2.5 s after the 5th", fuzz.Step{Resource: "leases", Action: proxy.Hold, After: 5, Length: long}},
			{"node-a's Lease events only, held for 2.5 s", fuzz.Step{Resource: "leases", Object: "node-a", Action: proxy.Hold, Length: long}},
			{"Node events held for 2.5 s", fuzz.Step{Resource: "nodes", Action: proxy.Hold, Length: long}},
			{"Lease watch broken at its 1st event", fuzz.Step{Resource: "leases", Action: proxy.Break, Length: kcm.Bounds.MaxFaultEnd}},
			{"Lease watch relisted (410) at its 1st event, from an apiserver 0.1 s behind", fuzz.Step{Resource: "leases", Action: proxy.Expire, Lag: kcm.Bounds.MaxDelay, Length: kcm.Bounds.MaxFaultEnd}},
			{"restart right after its 1st node write", fuzz.Step{Resource: "nodes", Action: proxy.Freeze, Length: kcm.Bounds.MaxFaultEnd}},
			{"restart right after its 1st node write, onto an apiserver 0.1 s behind", fuzz.Step{Resource: "nodes", Action: proxy.Freeze, Lag: kcm.Bounds.MaxDelay, Length: kcm.Bounds.MaxFaultEnd}},
			{"restart before the answer to its 1st node write", fuzz.Step{Resource: "nodes", Action: proxy.Cut, Length: kcm.Bounds.MaxFaultEnd}},
		}
		lines := []string{
			fmt.Sprintf("| pattern | node-b | gate off: runs with a violation (of %d) | gate on |", runs),
			"|---|---|---|---|",
		}
		for _, p := range ps {
			for die, what := range []string{"renews", "stops at t+0.2 s"} {
				var s fuzz.Schedule
				if p.st.Action == proxy.Delay && p.st.Delay == 0 && p.st.Resource == "" {
					s = fuzz.Schedule{Knobs: map[string]int{"die": die}}
				} else {
					s = nodeStep(die, p.st)
				}
				cells := []string{}
				for _, gate := range []bool{false, true} {
					oracles := map[string]int{}
					hits := 0
					for range runs {
						res := runNodes(gate, s)
						if len(res.Violations) > 0 {
							hits++
						}
						for _, v := range res.Violations {
							oracles[v.Oracle]++
						}
					}
					cell := fmt.Sprintf("%d/%d", hits, runs)
					for _, o := range []string{"live-node-unknown", "dead-node-missed"} {
						if oracles[o] > 0 {
							cell += fmt.Sprintf(" %s ×%d", o, oracles[o])
						}
					}
					cells = append(cells, cell)
				}
				lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s |", p.name, what, cells[0], cells[1]))
				GinkgoWriter.Println(lines[len(lines)-1])
			}
		}
		Expect(os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644)).To(Succeed())
	})
})

var _ = Describe("node lifecycle controller: a dead node's Lease written without being renewed", func() {
	touched := fuzz.Schedule{Knobs: map[string]int{"die": 2}}
	It("with "+kcm.LeaseGate+" off, the dead node is marked Unknown", func() {
		res := runNodes(false, touched)
		Expect(res.Violations).To(BeEmpty(), res.Report())
	})
	It("with it on, is never marked: the live GET's resourceVersion differs from the last renewal's, four grace periods on", func() {
		// The gate-on scenario with one more check, which watches node-b
		// for four more grace periods.
		s := kcm.NodeLifecycle(true)
		s.Name += "-long"
		s.Checks = append(s.Checks, fuzz.Check{Name: "still-ready", Fn: func(ctx context.Context, x *fuzz.Exec, _ trace.Trace) error {
			for end := time.Now().Add(4 * kcm.NodeGrace); time.Now().Before(end); time.Sleep(kcm.NodeMonitorPeriod) {
				var n corev1.Node
				if err := x.Direct.Get(ctx, client.ObjectKey{Name: "node-b"}, &n); err != nil {
					return &fuzz.HarnessError{Err: err}
				}
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
						return nil
					}
				}
			}
			return fmt.Errorf("node node-b: still Ready at t%+.2fs", time.Since(x.Mark()).Seconds())
		}})
		e, err := fuzz.NewEnv(s)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(e.Stop)
		res, err := e.Run(context.Background(), touched, fuzz.Retries(3))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Violations).To(ContainElements(
			SatisfyAll(HaveField("Oracle", "dead-node-missed"), HaveField("Message", ContainSubstring("node node-b: stopped renewing"))),
			SatisfyAll(HaveField("Oracle", "still-ready"), HaveField("Message", ContainSubstring("node node-b: still Ready"))),
		), res.Report())
	})
	It("with it on and the fix (fix/compare-cached-lease.patch: the live Lease compared with the informer's copy), is marked Unknown", func() {
		// kube-controller-manager built with the patch (hack/kcm-patched.sh,
		// cached beside the release's), run by an Env of its own.
		out, err := exec.Command("bash", "../../hack/kcm-patched.sh", "fix/compare-cached-lease.patch").Output()
		Expect(err).NotTo(HaveOccurred(), "building kube-controller-manager with the fix: %s", errOutput(err))
		bin := strings.TrimSpace(string(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:]))
		Expect(bin).To(BeAnExistingFile())
		prev, had := os.LookupEnv("STALEFUZZ_KUBE_CONTROLLER_MANAGER")
		Expect(os.Setenv("STALEFUZZ_KUBE_CONTROLLER_MANAGER", bin)).To(Succeed())
		DeferCleanup(func() {
			if had {
				os.Setenv("STALEFUZZ_KUBE_CONTROLLER_MANAGER", prev)
			} else {
				os.Unsetenv("STALEFUZZ_KUBE_CONTROLLER_MANAGER")
			}
		})
		Expect(kcm.Binary()).To(Equal(bin))
		e, err := fuzz.NewEnv(kcm.NodeLifecycle(true))
		Expect(err).NotTo(HaveOccurred())
		res, err := e.Run(context.Background(), touched, fuzz.Retries(3))
		Expect(err).NotTo(HaveOccurred(), "schedule %s", touched)
		Expect(e.Stop()).To(Succeed())
		Expect(res.Violations).To(BeEmpty(), res.Report())
		Expect(reaper.Running(bin)).To(BeEmpty(), "the fixed kube-controller-manager left running")
	})
})

// errOutput is a failed command's standard error, when it has one.
func errOutput(err error) string {
	var x *exec.ExitError
	if errors.As(err, &x) {
		return string(x.Stderr)
	}
	return ""
}
