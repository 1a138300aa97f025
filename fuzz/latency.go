package fuzz

import (
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
// drawn uniformly from [0, most] with rng (one step per client; one step for
// every client when there are more clients than MaxSteps, or when same),
// each amount one the RealisticLatency codec can write, so that the
// schedule is an input of that space. most is cut at Bounds.MaxDelay.
func (s *Scenario) latencySchedule(knobs map[string]int, rng *rand.Rand, most time.Duration, same bool) Schedule {
	b := s.Bounds.orDefault()
	most = min(most, b.MaxDelay)
	draw := func() time.Duration {
		// The codec's levels are quad5(0..31) of MaxDelay: pick the
		// highest level within a uniform draw.
		d := time.Duration(rng.Int64N(int64(most) + 1))
		return quad5(unquad5Floor(d, b.MaxDelay), b.MaxDelay)
	}
	sched := Schedule{Knobs: knobs}
	length := min(b.MaxLength, b.MaxLagEnd)
	if same || len(s.Clients) > MaxSteps {
		sched.Steps = []Step{{Action: proxy.Delay, Delay: draw(), Length: length}}
		return sched
	}
	for _, c := range s.Clients {
		sched.Steps = append(sched.Steps, Step{Client: c, Action: proxy.Delay, Delay: draw(), Length: length})
	}
	return sched
}

// unquad5Floor is the highest byte whose quad5 value is at most d.
func unquad5Floor(d, hi time.Duration) byte {
	var best byte
	for b := byte(0); b <= 31; b++ {
		if quad5(b, hi) <= d {
			best = b
		}
	}
	return best
}

// watchLatencies are, in res, the times from a controller's write being
// answered to the arrival of its watch event at the proxy (each client's
// watch of it): how late a healthy apiserver delivers an event, sorted.
func watchLatencies(res *Result) []time.Duration {
	answered := map[string]time.Time{}
	for _, r := range res.Trace.Requests {
		if r.ReturnedRV != "" && r.Code < 300 {
			answered[r.ReturnedRV] = r.Start.Add(r.Latency)
		}
	}
	var out []time.Duration
	for _, ev := range res.Trace.Events {
		if at, ok := answered[ev.ResourceVersion]; ok {
			out = append(out, max(0, ev.Arrived.Sub(at)))
		}
	}
	slices.Sort(out)
	return out
}

// watchLatency is the longest of watchLatencies.
func watchLatency(res *Result) time.Duration {
	l := watchLatencies(res)
	if len(l) == 0 {
		return 0
	}
	return l[len(l)-1]
}

// latencySeeds are the latency spaces' ordinary-latency seeds,
// MaxLatencySeeds of them, the knob settings in turn (those with the fewest
// knobs away from zero first), in turn latency on every watch of every client
// and each client's own, their amounts drawn (from a fixed seed) up to the
// longest watch latency the reference runs measured (most). The workload's
// knobs vary with them, so that a race one setting brings out under
// latency alone is met in the first minutes of a campaign.
func (s *Scenario) latencySeeds(most time.Duration) []Schedule {
	if !s.Space.latency() || most <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(most), 0x1a7e))
	settings := knobSettings(s.Knobs, MaxLatencySeeds)
	var out []Schedule
	for i := range MaxLatencySeeds {
		n := len(settings)
		out = append(out, s.latencySchedule(settings[i%n], rng, most, (i+i/n)%2 == 0))
	}
	return out
}
