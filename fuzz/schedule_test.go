package fuzz

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/proxy"
)

var testScenario = Scenario{
	Name:      "codec",
	Clients:   []string{"replica-0", "replica-1"},
	Resources: []string{"rollouts", "configmaps"},
	Objects:   []string{"a", "b", "c"},
	Knobs:     []Knob{{Name: "replicas", Values: 2}, {Name: "at", Values: 5}},
}

// FuzzDecode checks that decoding is total and bounded and that Encode is its
// inverse on what it produces.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 3, 0, 0x11, 40, 200, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, space := range []Space{LagOnly, LagAndLoss, Realistic, AnchoredLoss, RealisticLatency, OrdinaryLatency, Composed} {
			s := testScenario
			s.Space = space
			sch := s.Decode(b)
			checkBounds(t, s, sch)
			if again := s.Decode(s.Encode(sch)); !reflect.DeepEqual(again, sch) {
				t.Fatalf("Decode(Encode(%s)) = %s", sch, again)
			}
		}
	})
}

func checkBounds(t *testing.T, s Scenario, sch Schedule) {
	t.Helper()
	if len(sch.Steps) > MaxSteps {
		t.Fatalf("%d steps > MaxSteps", len(sch.Steps))
	}
	for _, k := range s.Knobs {
		if v, ok := sch.Knobs[k.Name]; !ok || v < 0 || v >= k.Values {
			t.Fatalf("knob %s = %d (present %v) outside [0,%d)", k.Name, v, ok, k.Values)
		}
	}
	faults, answers := 0, 0
	for _, st := range sch.Steps {
		maxDelay := DefaultBounds.MaxDelay
		if st.Action == proxy.Slow {
			maxDelay = MaxSlowAnswer
		}
		if st.Start < 0 || st.Start > DefaultBounds.MaxStart || st.Length < 0 || st.End() > DefaultBounds.MaxLagEnd || st.Delay < 0 || st.Delay > maxDelay ||
			st.Lag < 0 || st.Lag > DefaultBounds.MaxDelay || st.After < 0 || st.After >= maxAfter {
			t.Fatalf("step out of bounds: %s", st)
		}
		for _, r := range st.Rules("ns") {
			if err := r.Validate(); err != nil {
				t.Fatalf("step %s gives an invalid rule %v: %v", st, r, err)
			}
		}
		if st.Action == proxy.Drop && s.Space != LagAndLoss && s.Space != AnchoredLoss {
			t.Fatalf("%v schedule drops: %s", s.Space, st)
		}
		if st.IsAnswer() {
			answers++
			if s.Space != Composed {
				t.Fatalf("%v schedule has a fault on an answer: %s", s.Space, st)
			}
		} else if st.IsFault() {
			faults++
			if !s.Space.faults() {
				t.Fatalf("%v schedule has a fault: %s", s.Space, st)
			}
		}
		if st.IsLatency() && !s.Space.latency() {
			t.Fatalf("%v schedule has ordinary latency: %s", s.Space, st)
		}
		if !st.IsLatency() && s.Space == OrdinaryLatency {
			t.Fatalf("%v schedule has more than ordinary latency: %s", s.Space, st)
		}
	}
	if faults > 1 || answers > 1 {
		t.Fatalf("%d faults and %d answer faults in %s: at most one of each", faults, answers, sch)
	}
	if sch.LagEnd() > max(DefaultBounds.MaxLagEnd+DefaultBounds.MaxDelay, DefaultBounds.faultEnd()+MaxSlowAnswer) {
		t.Fatalf("lag ends at %v", sch.LagEnd())
	}
}

func TestDecodeLayout(t *testing.T) {
	s := testScenario
	s.Space = LagAndLoss
	got := s.Decode([]byte{1, 7, 0x21, 0x21, 255, 255, 2, 0, 0, 0})
	want := Schedule{
		Knobs: map[string]int{"replicas": 1, "at": 2},
		Steps: []Step{{Client: "replica-1", Resource: "configmaps", Object: "b", Types: []string{"MODIFIED"}, Start: DefaultBounds.MaxStart, Length: DefaultBounds.MaxLagEnd - DefaultBounds.MaxStart, Action: proxy.Drop}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if got := s.Decode(nil); len(got.Steps) != 0 || got.Knobs["replicas"] != 0 {
		t.Errorf("empty input: %s, want knobs 0 and no lag", got)
	}
	// One mutated byte changes one field of one step.
	base := []byte{0, 0, 0, 0, 10, 10, 0, 1, 0, 20, 20, 1}
	a, b := s.Decode(base), s.Decode(append([]byte{}, base...))
	b2 := append([]byte{}, base...)
	b2[9]++ // start of the second step
	b = s.Decode(b2)
	if !reflect.DeepEqual(a.Steps[0], b.Steps[0]) || a.Steps[1].Start == b.Steps[1].Start || a.Steps[1].Length != b.Steps[1].Length {
		t.Errorf("mutating one byte changed more than one field:\n%s\n%s", a, b)
	}
	if s := got.String(); s == "" {
		t.Error("empty String")
	}
}

func TestEncodeHandWritten(t *testing.T) {
	s := testScenario
	want := Schedule{
		Knobs: map[string]int{"replicas": 0, "at": 3},
		Steps: []Step{{Client: "replica-0", Resource: "rollouts", Start: quad(80, 0, DefaultBounds.MaxStart), Length: quad(120, MinLength, DefaultBounds.MaxLength), Action: proxy.Hold}},
	}
	if got := s.Decode(s.Encode(want)); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip: got %s, want %s", got, want)
	}
	if got := want.String(); got != "at=3; replicas=0; t+0.15s–0.63s hold rollouts for replica-0" {
		t.Errorf("String() = %q", got)
	}
}

func TestDecodeRandomBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, space := range []Space{LagOnly, LagAndLoss, Realistic, AnchoredLoss, RealisticLatency, OrdinaryLatency, Composed} {
		s := testScenario
		s.Space = space
		for range 10000 {
			b := make([]byte, r.IntN(64))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			checkBounds(t, s, s.Decode(b))
		}
	}
}

func TestDecodeRealisticLayout(t *testing.T) {
	s := testScenario
	s.Space = Realistic
	lag := quad5(31, DefaultBounds.MaxDelay)
	got := s.Decode([]byte{
		0, 0, // knobs
		0x20, 0x20, 0, 255, 3 | 31<<3, 2, // relist at the 3rd MODIFIED of rollouts/b for replica-0, lagging
		0x31, 0x21, 0, 255, 4, 1, // a second fault: decodes to a hold
		5, // a partial record: no step
	})
	want := Schedule{
		Knobs: map[string]int{"replicas": 0, "at": 0},
		Steps: []Step{
			{Client: "replica-0", Resource: "rollouts", Object: "b", Types: []string{"MODIFIED"}, Length: DefaultBounds.MaxLength, Action: proxy.Expire, After: 2, Lag: lag},
			{Client: "replica-1", Resource: "configmaps", Object: "b", Types: []string{"ADDED", "MODIFIED"}, Length: DefaultBounds.MaxLength, Action: proxy.Hold, After: 1},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if rules := got.Steps[0].Rules("ns"); len(rules) != 4 || rules[0].Action != proxy.Break || rules[1].Action != proxy.Expire || rules[2].Action != proxy.Rewind || rules[3].Action != proxy.Delay {
		t.Errorf("a lagging relist is Break, Expire, Rewind and Delay: got %v", rules)
	}

	restart := s.Decode([]byte{0, 0, 0x31, 0x20, 0, 255, 5, 1})
	st := restart.Steps[0]
	if st.Action != proxy.Cut || st.Client != "replica-1" || st.Verbs[0] != "patch" || st.Resource != "rollouts" || st.Subresource != "status" || st.After != 1 || st.Lag != 0 {
		t.Fatalf("restart record: got %s (%+v)", st, st)
	}
	if got, want := st.String(), "t+0.00s–2.00s restart replica-1 before it sees the answer to its 2nd patch rollouts/status"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if r := st.Rules("ns"); len(r) != 1 || r[0].Action != proxy.Cut || r[0].After != 1 || r[0].Subresource != "status" || len(r[0].Types) != 0 {
		t.Errorf("restart rules: %v", r)
	}
}

// TestDecodeLatencyLayout: in RealisticLatency, actions 6 and 7 are ordinary
// latency on every watch of one client, or of every client; the other
// actions mean what they mean in Realistic.
func TestDecodeLatencyLayout(t *testing.T) {
	s := testScenario
	s.Space = RealisticLatency
	in := []byte{
		1, 0, // knobs
		0xf1, 0xf1, 0, 255, 6 | 12<<3, 7, // replica-1's every watch, 12/31 of MaxDelay; types, object and after unused
		0x00, 0x00, 0, 255, 7 | 31<<3, 0, // every client's every watch, MaxDelay
		0x20, 0x20, 0, 255, 3, 2, // a relist, as in Realistic
	}
	got := s.Decode(in)
	want := Schedule{
		Knobs: map[string]int{"replicas": 1, "at": 0},
		Steps: []Step{
			{Client: "replica-1", Length: DefaultBounds.MaxLength, Action: proxy.Delay, Delay: quad5(12, DefaultBounds.MaxDelay)},
			{Length: DefaultBounds.MaxLength, Action: proxy.Delay, Delay: DefaultBounds.MaxDelay},
			{Client: "replica-0", Resource: "rollouts", Object: "b", Types: []string{"MODIFIED"}, Length: DefaultBounds.MaxLength, Action: proxy.Expire, After: 2},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !got.Steps[0].IsLatency() || !got.Steps[1].IsLatency() || got.Steps[2].IsLatency() || got.HasFault() != true {
		t.Errorf("IsLatency: %v %v %v", got.Steps[0].IsLatency(), got.Steps[1].IsLatency(), got.Steps[2].IsLatency())
	}
	for i, want := range []string{
		"t+0.00s–2.00s latency 0.149s on every watch of replica-1",
		"t+0.00s–2.00s latency 1.000s on every watch of every client",
	} {
		if s := got.Steps[i].String(); s != want {
			t.Errorf("step %d: String() = %q, want %q", i, s, want)
		}
		if c := got.Steps[i].Cause(); !strings.HasPrefix(c, "real: ordinary latency") {
			t.Errorf("step %d: Cause() = %q", i, c)
		}
	}
	if r := got.Steps[1].Rules("ns"); len(r) != 1 || r[0].Client != "" || r[0].Resource != "" || r[0].Namespace != "ns" || r[0].Delay != DefaultBounds.MaxDelay {
		t.Errorf("every client's latency: rules %+v", r)
	}
	// In OrdinaryLatency, latency records mean the same and every other
	// record is latency too.
	s.Space = OrdinaryLatency
	if ol := s.Decode(in); !reflect.DeepEqual(ol.Steps[:2], want.Steps[:2]) || !ol.Steps[2].IsLatency() || ol.Steps[2].Client != "replica-0" {
		t.Errorf("OrdinaryLatency decodes %s", ol)
	}
	// In Realistic the same bytes are holds: that corpus keeps its meaning.
	s.Space = Realistic
	if old := s.Decode(in); old.Steps[0].Action != proxy.Hold || old.Steps[1].Action != proxy.Hold || old.Steps[0].Resource != "configmaps" {
		t.Errorf("Realistic decodes %s", old)
	}
}

// TestDecodeComposedLayout: in Composed, a restart record whose after
// byte's high nibble is 1 to 6 is a fault on an answer, besides one break,
// relist or restart; the bytes of RealisticLatency inputs with that nibble
// 0 mean the same as there.
func TestDecodeComposedLayout(t *testing.T) {
	s := testScenario
	s.Space = Composed
	in := []byte{
		0, 0, // knobs
		0x20, 0x20, 0, 255, 3, 2, // a relist, as in Realistic
		0x21, 0x10, 0, 255, 4, 0x11, // lose the answer to replica-1's 2nd update of rollouts: a second fault
		0x31, 0x20, 0, 255, 5 | 31<<3, 0x31, // slow: a second answer fault decodes to a hold
		0x10, 0x10, 0, 255, 4, 1, // a second restart decodes to a hold
		0x00, 0x00, 0, 255, 7 | 4<<3, 0, // latency, as in RealisticLatency
	}
	got := s.Decode(in)
	want := []string{
		"t+0.00s–2.00s break the watch (410 on re-watch: relist) at MODIFIED rollouts/b after the first 2 for replica-0",
		"t+0.00s–2.00s lose the answer to replica-1's 2nd update rollouts",
		"t+0.00s–2.00s hold ADDED+MODIFIED rollouts/b after the first 1 for replica-1",
		"t+0.00s–2.00s hold ADDED rollouts/a after the first 1 for replica-0",
		"t+0.00s–2.00s latency 0.016s on every watch of every client",
	}
	if len(got.Steps) != len(want) {
		t.Fatalf("got %s", got)
	}
	for i, w := range want {
		if g := got.Steps[i].String(); g != w {
			t.Errorf("step %d: got %q, want %q", i, g, w)
		}
	}
	if r := got.Steps[1].Rules("ns"); len(r) != 1 || r[0].Action != proxy.Lose || r[0].After != 1 || r[0].Client != "replica-1" || len(r[0].Verbs) != 1 || r[0].Verbs[0] != "update" {
		t.Errorf("lose rules: %+v", r)
	}
	for nibble, w := range map[byte]string{
		0:  "restart replica-0 right after its 1st write",
		1:  "lose the answer to replica-0's 1st write",
		2:  "reset the answer to replica-0's 1st write",
		3:  "slow the answer to replica-0's 1st write by 1.60s",
		4:  "reject replica-0's 1st write with 429",
		5:  "reject replica-0's 1st write with 500",
		6:  "reject replica-0's 1st write with 503",
		7:  "restart replica-0 right after its 1st write",
		9:  "restart replica-0 right after its 1st write",
		15: "restart replica-0 right after its 1st write",
	} {
		st := s.Decode([]byte{0, 0, 0, 0, 0, 255, 4 | 31<<3, nibble << 4}).Steps[0]
		if g := st.String(); !strings.HasSuffix(g, w) && !strings.Contains(g, w+",") {
			t.Errorf("nibble %d: got %q, want %q", nibble, g, w)
		}
		if !strings.HasPrefix(st.Cause(), "real: ") {
			t.Errorf("nibble %d: Cause() = %q", nibble, st.Cause())
		}
	}
	// RealisticLatency reads the same bytes with the answer fault as the
	// restart it was there; a relist and latency alike.
	s.Space = RealisticLatency
	old := s.Decode(in)
	if old.Steps[0].String() != want[0] || old.Steps[1].Action != proxy.Hold || old.Steps[4].String() != want[4] {
		t.Errorf("RealisticLatency decodes %s", old)
	}
}

// TestCommittedCorpusMeaning pins what the committed FuzzDecode corpus entry
// decodes to in the spaces that existed before Realistic: a codec change
// that alters it fails here (the scenario packages pin their own entries).
func TestCommittedCorpusMeaning(t *testing.T) {
	b, err := ReadCorpusEntry("testdata/fuzz/FuzzDecode/6e5f311ca8b8e322")
	if err != nil {
		t.Fatal(err)
	}
	for space, want := range map[Space]string{
		// Both printed by the code at 4a7839b, before Realistic existed.
		LagOnly:    "at=3; replicas=0; t+1.19s–2.50s delay 0.04s ADDED+MODIFIED rollouts/c for replica-0",
		LagAndLoss: "at=3; replicas=0; t+1.19s–2.50s delay 0.04s ADDED+MODIFIED rollouts/c for replica-0",
	} {
		s := testScenario
		s.Space = space
		if got := s.Decode(b).String(); got != want {
			t.Errorf("%v: %q decodes to %q, it meant %q", space, b, got, want)
		}
	}
}

func TestBoundsFit(t *testing.T) {
	if err := DefaultBounds.fits(LagOnly); err != nil {
		t.Fatalf("DefaultBounds: %v", err)
	}
	tooLong := DefaultBounds
	tooLong.MaxLagEnd = Budget
	if err := tooLong.fits(LagOnly); err == nil {
		t.Fatal("bounds whose lag alone fills the budget were accepted")
	}
}

func TestRealisticBoundsFit(t *testing.T) {
	if err := DefaultBounds.fits(Realistic); err == nil {
		t.Fatal("DefaultBounds leave no room for a relist or restart, yet fit the Realistic space")
	}
	b := Bounds{MaxStart: 500 * time.Millisecond, MaxLength: 1500 * time.Millisecond, MaxLagEnd: 1500 * time.Millisecond, MaxDelay: 500 * time.Millisecond}
	if err := b.fits(Realistic); err != nil {
		t.Fatalf("%+v: %v", b, err)
	}
	if _, err := NewEnv(Scenario{Name: "r", Space: Realistic, Start: func(context.Context, *Exec) error { return nil }, Drive: func(context.Context, *Exec) error { return nil }}); err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("NewEnv with a Realistic space that cannot fit a restart: got %v, want an error naming the budget", err)
	}
}

func TestQuietFitsSettleBudget(t *testing.T) {
	for _, q := range []time.Duration{0, SettleBudget / 2} {
		if err := (Scenario{Quiet: q}).validQuiet(); err != nil {
			t.Errorf("Quiet %v: %v", q, err)
		}
	}
	for _, q := range []time.Duration{SettleBudget, SettleBudget + time.Second, -time.Second} {
		if err := (Scenario{Quiet: q}).validQuiet(); err == nil {
			t.Errorf("Quiet %v (settle budget %v) was accepted", q, SettleBudget)
		}
	}
	if _, err := NewEnv(Scenario{Name: "q", Quiet: SettleBudget, Start: func(context.Context, *Exec) error { return nil }, Drive: func(context.Context, *Exec) error { return nil }}); err == nil || !strings.Contains(err.Error(), "quiet") {
		t.Errorf("NewEnv with a quiet period as long as the settle budget: got %v, want an error naming the quiet period", err)
	}
}

// TestAnchoredLossMovesADropByOneByte: byte [5] of a record anchors a drop to
// the Nth matching event; one more is the next event.
func TestAnchoredLossMovesADropByOneByte(t *testing.T) {
	s := testScenario
	s.Space = AnchoredLoss
	in := []byte{0, 0, 0x20, 0x00, 0, 255, 2, 5} // two knobs, then: client 0 MODIFIED, resource 0, t+0, whole window, drop, after 5
	st := s.Decode(in).Steps[0]
	if st.Action != proxy.Drop || st.After != 5 || !reflect.DeepEqual(st.Types, []string{"MODIFIED"}) {
		t.Fatalf("decoded %s, want a drop of MODIFIED events after the first 5", st)
	}
	in[7]++
	if st := s.Decode(in).Steps[0]; st.After != 6 || st.Action != proxy.Drop {
		t.Fatalf("byte [5] + 1 decoded %s, want the drop after the first 6", st)
	}
}

func TestCorpusEntryRoundTrip(t *testing.T) {
	input := []byte{0x00, 0xff, '"', '\\', 'a', 0x80}
	path, name, err := writeCorpusEntry(t.TempDir(), "scenario-0123456789ab", input)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCorpusEntry(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(input) {
		t.Errorf("read back %q, wrote %q", got, input)
	}
	if len(name) != 16 {
		t.Errorf("name %q: want go test's 16 hex digits", name)
	}
}
