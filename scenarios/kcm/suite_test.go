package kcm_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/reaper"
	"github.com/stalefuzz/stalefuzz/scenarios/kcm"
)

// TestMain shares one control plane among every Env of this test binary
// (the suite's and the fuzz targets').
func TestMain(m *testing.M) { os.Exit(fuzz.Main(m)) }

func TestKCM(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kcm")
}

// envs are started on first use: one per controller and gate setting.
var envs = map[string]*fuzz.Env{}

func envFor(c kcm.Controller, gate bool) *fuzz.Env {
	GinkgoHelper()
	key := fmt.Sprint(c, gate)
	if e := envs[key]; e != nil {
		return e
	}
	e, err := fuzz.NewEnv(kcm.Scenario(c, gate))
	Expect(err).NotTo(HaveOccurred())
	envs[key] = e
	return e
}

var _ = AfterSuite(func() {
	for _, e := range envs {
		Expect(e.Stop()).To(Succeed())
	}
})

// Every execution kills the kube-controller-manager it started, the ones a
// restart started included. Only this test process's are counted: another
// run on the machine (a campaign, a replay) has its own.
var _ = AfterEach(func() {
	Eventually(controllerManagers).WithTimeout(5*time.Second).Should(BeEmpty(), "kube-controller-manager processes left running")
})

func controllerManagers() []int { return reaper.RunningUnder(kcm.Binary(), os.Getpid()) }

// run runs s; an execution that could not be judged (a harness error) is run
// again, up to three times in all: a harness error is never a finding.
func run(c kcm.Controller, gate bool, s fuzz.Schedule) *fuzz.Result {
	GinkgoHelper()
	res, err := envFor(c, gate).Run(context.Background(), s, fuzz.Retries(3))
	Expect(err).NotTo(HaveOccurred(), "schedule %s", s)
	return res
}

// hold holds resource's events for kube-controller-manager once the first
// after of them have passed, for the longest window.
func hold(knobs map[string]int, resource string, after int) fuzz.Schedule {
	return fuzz.Schedule{Knobs: knobs, Steps: []fuzz.Step{{Client: kcm.Client, Resource: resource, Action: proxy.Hold,
		After: after, Length: kcm.Bounds.MaxLagEnd}}}
}

// restartAfterCreate restarts kube-controller-manager right after the answer
// to its nth pod create, onto an apiserver lag behind (lists served from
// before that create).
func restartAfterCreate(knobs map[string]int, n int, lag time.Duration) fuzz.Schedule {
	return fuzz.Schedule{Knobs: knobs, Steps: []fuzz.Step{{Client: kcm.Client, Resource: "pods", Verbs: []string{"create"}, Subresource: "-",
		Action: proxy.Freeze, After: n - 1, Lag: lag, Length: kcm.Bounds.MaxLength}}}
}

// relistPods breaks kube-controller-manager's pod watch at the nth pod event
// and answers its re-watch with 410 Gone: it relists.
func relistPods(knobs map[string]int, n int) fuzz.Schedule {
	return fuzz.Schedule{Knobs: knobs, Steps: []fuzz.Step{{Client: kcm.Client, Resource: "pods", Types: []string{"MODIFIED"},
		Action: proxy.Expire, After: n - 1, Length: kcm.Bounds.MaxLength}}}
}

// outcome is one execution as a truth table cell.
type outcome struct {
	created, conflicts int
	safety, converge   string
}

func observe(res *fuzz.Result) outcome {
	var o outcome
	for _, r := range res.Trace.Requests {
		if r.Client != kcm.Client {
			continue
		}
		if r.Verb == "create" && r.Resource == "pods" && r.Code == 201 {
			o.created++
		}
		if r.Code == 409 {
			o.conflicts++
		}
	}
	for _, v := range res.Violations {
		first, _, _ := strings.Cut(v.Message, "\n")
		switch v.Oracle {
		case "safety":
			o.safety = first
		case "convergence":
			o.converge = first
		}
	}
	return o
}

func (o outcome) cell() string {
	s := fmt.Sprintf("%d created, %d×409", o.created, o.conflicts)
	if o.safety != "" {
		s += ", **unsafe**"
	}
	if o.converge != "" {
		s += ", not converged"
	}
	return s
}

// Job-A (the report of KEP-5647's Job gate, traced in README.md): the Job
// controller's own status writes are not yet in its cache when its next sync
// runs on pod events; with the gate off it counts the finished pod as never
// having existed and creates a pod the spec does not allow.
var _ = Describe("Job: its own status writes unseen (the jobs watch held after its creation and first status write)", func() {
	// The committed finding (testdata/fuzz/FuzzJobGateOff), with the other
	// pod finishing too.
	s := hold(map[string]int{"finish": 0, "rest": 1}, "jobs", 2)
	It("with StaleControllerConsistencyJob off, creates a pod the spec does not allow", func() {
		res := run(kcm.Job, false, s)
		Expect(res.Violations).NotTo(BeEmpty(), "schedule %s ran clean:\n%s", s, res.Report())
		Expect(observe(res).safety).To(ContainSubstring("the spec allowed"), res.Report())
		// The finding says why: the Job it synced was older than its own
		// status writes.
		Expect(res.Violations[0].Message).To(ContainSubstring("kube-controller-manager's own update jobs/status"), res.Report())
	})
	It("with StaleControllerConsistencyJob on (the default), waits for its cache and stays safe", func() {
		res := run(kcm.Job, true, s)
		Expect(res.Violations).To(BeEmpty(), res.Report())
	})
})

// The whole table is opt-in (STALEFUZZ_TRUTH_TABLE=FILE writes it; `make
// truth-table-kcm`): about 60 executions.
var _ = Describe("truth table", Label("truth-table"), func() {
	It("runs every pattern with the gate off and on", func() {
		out := os.Getenv("STALEFUZZ_TRUTH_TABLE")
		if out == "" {
			Skip("set STALEFUZZ_TRUTH_TABLE=FILE to run the kube-controller-manager truth table (make truth-table-kcm)")
		}
		type pattern struct {
			c    kcm.Controller
			name string
			s    fuzz.Schedule
		}
		var ps []pattern
		for _, c := range kcm.Controllers {
			k := map[string]int{}
			switch c {
			case kcm.Job:
				k = map[string]int{"rest": 1}
			case kcm.ReplicaSet, kcm.StatefulSet:
				k = map[string]int{"scale": 1}
			case kcm.DaemonSet:
				k = map[string]int{"nodes": 1}
			}
			own := map[kcm.Controller]string{kcm.Job: "jobs", kcm.ReplicaSet: "replicasets", kcm.DaemonSet: "daemonsets", kcm.StatefulSet: "statefulsets"}[c]
			ps = append(ps,
				pattern{c, "no fault", fuzz.Schedule{Knobs: k}},
				pattern{c, "own workload's events held after its creation", hold(k, own, 1)},
				pattern{c, "own workload's events held after its 2nd event", hold(k, own, 2)},
				pattern{c, "own workload's events held after its 3rd event", hold(k, own, 3)},
				pattern{c, "pod events held after the 1st", hold(k, "pods", 1)},
				pattern{c, "pod events held after the 3rd", hold(k, "pods", 3)},
				pattern{c, "pod watch relisted (410) at the 1st MODIFIED", relistPods(k, 1)},
				pattern{c, "pod watch relisted (410) at the 3rd MODIFIED", relistPods(k, 3)},
				pattern{c, "restart right after its 1st pod create", restartAfterCreate(k, 1, 0)},
				pattern{c, "restart right after its 1st pod create, onto an apiserver 0.3s behind", restartAfterCreate(k, 1, 300*time.Millisecond)},
				pattern{c, "restart right after its 2nd pod create, onto an apiserver 0.3s behind", restartAfterCreate(k, 2, 300*time.Millisecond)},
			)
			if c == kcm.ReplicaSet || c == kcm.DaemonSet || c == kcm.StatefulSet {
				kill := map[string]int{"kill": 1}
				ps = append(ps, pattern{c, "a pod deleted by someone else at t+0.4s, pod events held after the 3rd", hold(kill, "pods", 3)})
			}
		}
		lines := []string{"| controller | pattern | schedule | gate off | gate on |", "|---|---|---|---|---|"}
		for _, p := range ps {
			off, on := observe(run(p.c, false, p.s)), observe(run(p.c, true, p.s))
			lines = append(lines, fmt.Sprintf("| %s | %s | `%s` | %s | %s |", p.c, p.name, p.s, off.cell(), on.cell()))
			for gate, o := range map[string]outcome{"off": off, "on": on} {
				for _, msg := range []string{o.safety, o.converge} {
					if msg != "" {
						lines = append(lines, fmt.Sprintf("|  | ↳ gate %s |  | %s |  |", gate, strings.ReplaceAll(msg, "|", "/")))
					}
				}
			}
		}
		Expect(os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644)).To(Succeed())
	})
})
