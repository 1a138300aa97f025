package fuzz

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

// MaxLatencySeeds bounds the ordinary-latency seeds of a campaign in the
// RealisticLatency space (latencySeeds).
const MaxLatencySeeds = 8

// latencySchedule is ordinary latency at knobs: every watch event of each
// client delayed, for the whole lag window from the mark, by its own amount
// (one step per client; one step for every client when there are more
// clients than MaxSteps, or when same), each the log-uniform quantile u of
// [lo, Bounds.MaxDelay] (u from draw, in [0, 1]): most amounts are tens of
// milliseconds, a few reach the most. Each amount is one the
// RealisticLatency codec can write, so that the schedule is an input of
// that space.
//
// A local apiserver delivers a write's watch event to every watcher within
// a millisecond or two (the reference runs measure it: lo); a real
// cluster's are later and vary (a busy apiserver or etcd, API Priority and
// Fairness queueing, a network between zones): tens of milliseconds on a
// busy control plane, hundreds under load. Bounds.MaxDelay (0.3 s for
// target files) is the most the space calls ordinary.
func (s *Scenario) latencySchedule(knobs map[string]int, lo time.Duration, draw func() float64, same bool) Schedule {
	b := s.Bounds.orDefault()
	lo = min(max(lo, time.Millisecond), b.MaxDelay)
	delay := func() time.Duration {
		u := min(max(draw(), 0), 1)
		f := math.Exp(math.Log(float64(lo)) + u*(math.Log(float64(b.MaxDelay))-math.Log(float64(lo))))
		return quad5(unquad5(time.Duration(f), b.MaxDelay), b.MaxDelay)
	}
	sched := Schedule{Knobs: knobs}
	length := min(b.MaxLength, b.MaxLagEnd)
	if same || len(s.Clients) > MaxSteps {
		sched.Steps = []Step{{Action: proxy.Delay, Delay: delay(), Length: length}}
		return sched
	}
	for _, c := range s.Clients {
		sched.Steps = append(sched.Steps, Step{Client: c, Action: proxy.Delay, Delay: delay(), Length: length})
	}
	return sched
}

// watchLatencies are, in res, the times from a controller's stored write
// being answered to the first arrival at the proxy of its watch event on
// each client's watch: how late a healthy apiserver delivers an event,
// sorted.
func watchLatencies(res *Result) []time.Duration {
	answered := map[string]time.Time{}
	for _, r := range res.Trace.Requests {
		if r.IsWrite() && !r.DryRun && r.ReturnedRV != "" && r.Code/100 == 2 {
			answered[r.ReturnedRV] = r.Start.Add(r.Latency)
		}
	}
	first := map[[2]string]bool{}
	var out []time.Duration
	for _, ev := range res.Trace.Events {
		k := [2]string{ev.Client, ev.ResourceVersion}
		if at, ok := answered[ev.ResourceVersion]; ok && !first[k] {
			first[k] = true
			out = append(out, max(0, ev.Arrived.Sub(at)))
		}
	}
	slices.Sort(out)
	return out
}

// median is the middle of sorted durations; 0 for none.
func median(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}

// latencySeeds are the latency spaces' ordinary-latency seeds,
// MaxLatencySeeds of them, the knob settings in turn (those with the fewest
// knobs away from zero first), in turn latency on every watch of every
// client and each client's own. Their amounts are stratified, from the
// reference runs' median watch latency (lo) up (latencySchedule): the first
// round of settings gets the highest stratum, the next the one below, so
// that each setting meets a late watch among its first seeds (a race that
// needs 60 ms of latency is met in a seed, not left to the mutator's
// luck); each client's own amount varies (from a fixed seed) around its
// stratum. The workload's knobs vary with them, so that a race one setting
// brings out under latency alone is met in the first minutes of a campaign.
func (s *Scenario) latencySeeds(lo time.Duration) []Schedule {
	if !s.Space.latency() {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(lo), 0x1a7e))
	settings := knobSettings(s.Knobs, MaxLatencySeeds)
	n := len(settings)
	rounds := (MaxLatencySeeds + n - 1) / n
	var out []Schedule
	for i := range MaxLatencySeeds {
		u := 1 - (float64(i/n)+0.25)/float64(rounds)
		draw := func() float64 { return u + (rng.Float64()-0.5)/(2*float64(rounds)) }
		out = append(out, s.latencySchedule(settings[i%n], lo, draw, (i+i/n)%2 == 0))
	}
	return out
}
