package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// costCategories say where a sample of the proxy's profile goes: to the
// first category, in this order, that the innermost matching frame of its
// stack matches (a write's syscall under TLS under the relay is a syscall;
// an allocation under the trace is allocation, whose sites the allocation
// profile attributes).
var costCategories = []struct {
	name     string
	prefixes []string
}{
	{"network syscalls", []string{"syscall.", "internal/poll.", "internal/runtime/syscall", "runtime.netpoll"}},
	{"TLS (encryption, handshakes)", []string{"crypto/"}},
	{"allocation and GC", []string{"runtime.mallocgc", "runtime.newobject", "runtime.growslice", "runtime.makeslice", "runtime.gcBgMarkWorker", "runtime.gcAssist", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart", "runtime.gcDrain"}},
	{"frame decoding (watchframe)", []string{"github.com/stalefuzz/stalefuzz/proxy/internal/watchframe.", "google.golang.org/protobuf/"}},
	{"redaction", []string{"github.com/stalefuzz/stalefuzz/proxy/redact."}},
	{"trace recording", []string{"github.com/stalefuzz/stalefuzz/proxy/trace.", "main.(*traceFile)"}},
	{"rule matching", []string{"github.com/stalefuzz/stalefuzz/proxy.(*ruleSet)", "github.com/stalefuzz/stalefuzz/proxy.(*rvClock)"}},
	{"relay (stream queue, handler)", []string{"github.com/stalefuzz/stalefuzz/proxy."}},
	{"HTTP/2 to the apiserver", []string{"golang.org/x/net/http2."}},
	{"HTTP/1.1 to the clients", []string{"net/http", "bufio."}},
	{"scheduler", []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.futex", "runtime.mcall", "runtime.gopark", "runtime.notesleep", "runtime.stopm"}},
}

// costOf returns the category of a sample's stack (leaf first), "other"
// when no frame matches; runtime frames are skipped when skipRuntime (the
// allocation profile's site is the allocating caller).
func costOf(locs []*profile.Location, skipRuntime bool) string {
	for _, l := range locs {
		for _, line := range l.Line { // innermost inlined frame first
			if line.Function == nil {
				continue
			}
			name := line.Function.Name
			if skipRuntime && strings.HasPrefix(name, "runtime.") {
				continue
			}
			for _, c := range costCategories {
				for _, p := range c.prefixes {
					if strings.HasPrefix(name, p) {
						return c.name
					}
				}
			}
		}
	}
	return "other"
}

// profileCost is one category's share of the proxy's CPU and allocations.
type profileCost struct {
	name        string
	cpu         float64 // seconds
	allocBytes  int64
	allocObject int64
}

// proxyCosts reads dir/cpu.pprof and dir/allocs.pprof (stalefuzz proxy
// --profile) and returns the cost per category, largest CPU first, and
// the totals.
func proxyCosts(dir string) ([]profileCost, profileCost, error) {
	read := func(name string) (*profile.Profile, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		p, err := profile.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("unable to parse %s: %w", f.Name(), err)
		}
		return p, nil
	}
	byName := map[string]*profileCost{}
	get := func(n string) *profileCost {
		if byName[n] == nil {
			byName[n] = &profileCost{name: n}
		}
		return byName[n]
	}
	total := profileCost{name: "total"}
	cpu, err := read("cpu.pprof")
	if err != nil {
		return nil, total, err
	}
	ns := sampleIndex(cpu, "cpu")
	for _, s := range cpu.Sample {
		sec := float64(s.Value[ns]) / 1e9
		get(costOf(s.Location, false)).cpu += sec
		total.cpu += sec
	}
	allocs, err := read("allocs.pprof")
	if err != nil {
		return nil, total, err
	}
	space, objects := sampleIndex(allocs, "alloc_space"), sampleIndex(allocs, "alloc_objects")
	for _, s := range allocs.Sample {
		c := get(costOf(s.Location, true))
		c.allocBytes += s.Value[space]
		c.allocObject += s.Value[objects]
		total.allocBytes += s.Value[space]
		total.allocObject += s.Value[objects]
	}
	var out []profileCost
	for _, c := range byName {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b profileCost) int { return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(a.name, b.name)) })
	return out, total, nil
}

// sampleIndex is the index of a profile's sample type, or its last.
func sampleIndex(p *profile.Profile, typ string) int {
	for i, st := range p.SampleType {
		if st.Type == typ {
			return i
		}
	}
	return len(p.SampleType) - 1
}

// costTable prints the costs per event relayed.
func costTable(costs []profileCost, total profileCost, events int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "proxy CPU %.2f s and %.0f MB allocated over %d watch events relayed: %.2f µs, %.0f bytes and %.1f allocations an event\n",
		total.cpu, float64(total.allocBytes)/1e6, events, total.cpu*1e6/float64(events), float64(total.allocBytes)/float64(events), float64(total.allocObject)/float64(events))
	fmt.Fprintf(&b, "%-30s %7s %6s %9s %10s %8s\n", "where", "CPU s", "share", "µs/event", "B/event", "allocs/ev")
	for _, c := range costs {
		fmt.Fprintf(&b, "%-30s %7.2f %5.1f%% %9.2f %10.0f %8.2f\n", c.name, c.cpu, 100*c.cpu/max(total.cpu, 1e-9), c.cpu*1e6/float64(events),
			float64(c.allocBytes)/float64(events), float64(c.allocObject)/float64(events))
	}
	return b.String()
}

// TestProfileWritesBothProfiles: --profile's startProfile writes a CPU
// and an allocation profile that make bench's reader parses, the
// allocations of the run in them.
func TestProfileWritesBothProfiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profile")
	stop, err := startProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	var keep [][]byte
	for i := range 1000 { // 64 MB: the profile samples one allocation in 512 KiB
		keep = append(keep, make([]byte, 64<<10+i))
	}
	runtime.KeepAlive(keep)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	costs, total, err := proxyCosts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if total.allocBytes < 32<<20 || len(costs) == 0 {
		t.Errorf("allocation profile: %d bytes in %d categories, want at least %d bytes", total.allocBytes, len(costs), 32<<20)
	}
}
