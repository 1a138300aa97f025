package fuzz

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ProbedQuiet is the quiet period of a run whose every running client has an
// idle probe (Exec.Idle): the probes must say, at a look taken this long or
// longer after the last write, release or fault, that no client has work
// left. It is ample for a watch event the proxy just delivered, or the event
// of a client's own last write, to reach the client's queue (milliseconds
// here). The scenario's Quiet, which must outlast the longest retry backoff
// because a retrying controller is silent, applies to a run with a client
// that has no probe.
const ProbedQuiet = 150 * time.Millisecond

// probeInterval is how often a settling run asks the probes, from the end of
// the workload on: shorter than a controller's shortest retry backoff, so
// that a failed reconcile and the retry it schedules fall between different
// looks.
const probeInterval = 50 * time.Millisecond

// IdleProbe says whether a client has work left: a reconcile in flight, an
// item in its queue, or a retry it has scheduled. It is asked repeatedly while
// a run settles, never concurrently, and may keep state between calls. An
// error counts as not idle.
type IdleProbe func(ctx context.Context) (idle bool, err error)

// Idle registers probe for the named client of this execution (for every
// instance of it: a restart keeps the probe). Once every running client has
// one, a run settles when every probe says idle at a look ProbedQuiet or
// more after the last write, release or fault, rather than only after the
// scenario's Quiet. A probe
// must never call a client idle while a retry is due: settling would then
// judge a controller that is still retrying.
func (x *Exec) Idle(client string, probe IdleProbe) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.probes == nil {
		x.probes = map[string]IdleProbe{}
	}
	x.probes[client] = probe
}

// probed reports whether every running client has a probe.
func (x *Exec) probed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.controllers) == 0 {
		return false
	}
	for name := range x.controllers {
		if x.probes[name] == nil {
			return false
		}
	}
	return true
}

// idle asks every probe; all must say idle.
func (x *Exec) idle(ctx context.Context) bool {
	x.mu.Lock()
	probes := make([]IdleProbe, 0, len(x.probes))
	for _, p := range x.probes {
		probes = append(probes, p)
	}
	x.mu.Unlock()
	for _, p := range probes {
		if ok, err := p(ctx); err != nil || !ok {
			return false
		}
	}
	return true
}

// ReconcileMetrics probes a controller-runtime manager through its metrics
// endpoint (url, e.g. http://127.0.0.1:8080/metrics), over every controller
// it runs. It says idle when no reconcile is in flight
// (controller_runtime_active_workers), no workqueue holds a ready item
// (workqueue_depth), the reconcile counts (controller_runtime_reconcile_total)
// did not move since its previous call, and the latest that moved were
// successes or requeues after a delay, not errors or immediate requeues: an
// error, or Requeue, puts the request back after the rate limiter's backoff,
// during which a controller is silent but not done.
//
// It counts a RequeueAfter as done: use it for controllers whose RequeueAfter
// outlasts an execution (a periodic resync, say), not for one that polls
// every second. It relies on controller-runtime's priority queue (the
// default in v0.24 and v0.25; source-controller v1.9.3 runs v0.24.1), in
// which a request is queued once: a reconcile that
// succeeds after a failure has taken the retry the failure scheduled. When
// the counts of both kinds moved between two looks, it cannot tell which came
// last and assumes a retry is due, until the counts move again (or the
// scenario's Quiet settles the run).
func ReconcileMetrics(url string) IdleProbe {
	var (
		last    map[string]float64 // controller|result → count
		pending bool               // the latest counted reconciles included an error or requeue
	)
	client := &http.Client{Timeout: time.Second}
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, fmt.Errorf("unable to scrape %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, fmt.Errorf("unable to scrape %s: %w", url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("unable to scrape %s: %s", url, resp.Status)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return false, fmt.Errorf("unable to parse the metrics of %s: %w", url, err)
		}
		counts := map[string]float64{}
		retried, done := false, false
		for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
			key := label(m, "controller") + "|" + label(m, "result")
			counts[key] = m.GetCounter().GetValue()
			if counts[key] == last[key] {
				continue
			}
			switch label(m, "result") {
			case "error", "requeue":
				retried = true
			default:
				done = true
			}
		}
		moved := retried || done || last == nil
		last = counts
		switch {
		case retried:
			pending = true
		case done:
			pending = false
		}
		busy := sum(families["controller_runtime_active_workers"]) + sum(families["workqueue_depth"])
		return !moved && !pending && busy == 0, nil
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func sum(f *dto.MetricFamily) float64 {
	var n float64
	for _, m := range f.GetMetric() {
		n += m.GetGauge().GetValue()
	}
	return n
}

// retryBackoff is how long a controller may wait before it retries, after
// failing is, per client, how many of its writes failed (409 Conflict or an
// error) since its last success: client-go's default controller rate limiter
// (workqueue.DefaultTypedControllerRateLimiter, what controller-runtime and
// kube-controller-manager requeue with) waits 5 ms·2^(n-1) before the n-th
// retry of an item, so a controller that met a run of 409s is not done
// when it falls silent for the scenario's Quiet: the run settles only after
// the longest such wait. Capped at SettleBudget: a controller still backing
// off then is not settled (and is judged as one that never settled).
func retryBackoff(failing map[string]int) time.Duration {
	n := 0
	for _, f := range failing {
		n = max(n, f)
	}
	if n == 0 {
		return 0
	}
	if n > 10 { // 5 ms·2^9 = 2.56 s is past SettleBudget already
		return SettleBudget
	}
	return min(SettleBudget, 5*time.Millisecond<<(n-1))
}
