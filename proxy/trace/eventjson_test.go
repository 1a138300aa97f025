package trace

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzEventEntryJSON checks that appendEventEntry writes, byte for byte,
// what json.Marshal writes for Entry{Event: e}, or leaves the event to it.
func FuzzEventEntryJSON(f *testing.F) {
	t0 := time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC).Unix()
	for _, s := range []struct {
		client, group, resource, typ, kind, ns, name, rv, fate string
		stream                                                 uint64
		initialEnd                                             bool
		arrived, released, nanos                               int64
		zone                                                   int
		rule                                                   int
	}{
		{"kcm", "", "pods", "ADDED", "Pod", "default", "web-0", "12", "released", 7, false, t0, t0 + 1, 123456789, 0, -1},
		{"c", "apps", "deployments", "BOOKMARK", "", "", "", "99", "pending", 1, true, t0, 0, 5e8, 3600, 2},
		{"a<b", "\"q\"", "a\\b", "\x00\x1f", "é", "\u2028", "\xff", "&>", "dropped", 0, false, 0, 0, 0, -7 * 3600, 0},
		{"c", "", "r", "DELETED", "", "", "", "", "broken", 1 << 63, false, -62135596800, 0, 1, 0, 0}, // year 1
		{"c", "", "r", "MODIFIED", "", "", "", "", "aborted", 2, false, 253402300800, 0, 0, 0, 5},     // year 10000: json's error
		{"c", "", "r", "MODIFIED", "", "", "", "", "released", 2, false, t0, t0, 0, 25 * 3600, 5},     // a zone json refuses
	} {
		f.Add(s.client, s.group, s.resource, s.typ, s.kind, s.ns, s.name, s.rv, s.fate, s.stream, s.initialEnd, s.arrived, s.released, s.nanos, s.zone, s.rule)
	}
	f.Fuzz(func(t *testing.T, client, group, resource, typ, kind, ns, name, rv, fate string, stream uint64, initialEnd bool, arrived, released, nanos int64, zone, rule int) {
		loc := time.FixedZone("z", zone%(30*3600))
		e := Event{Client: client, Stream: stream, Group: group, Resource: resource, Type: typ, Kind: kind, Namespace: ns, Name: name,
			ResourceVersion: rv, InitialEnd: initialEnd, Arrived: time.Unix(arrived, nanos%1e9).In(loc), Fate: Fate(fate), Rule: rule}
		if released != 0 {
			e.Released = time.Unix(released, nanos%1e9).In(loc)
		}
		want, err := json.Marshal(Entry{Event: &e})
		got, ok := appendEventEntry([]byte("x"), &e)
		switch {
		case !ok:
			if string(got) != "x" {
				t.Fatalf("left to json.Marshal, but appended %q", got)
			}
			if err == nil {
				t.Fatalf("left to json.Marshal, which encodes it: %s", want)
			}
		case err != nil:
			t.Fatalf("json.Marshal fails (%v), appendEventEntry wrote %s", err, got)
		case string(got[1:]) != string(want):
			t.Fatalf("appendEventEntry:\n%s\njson.Marshal:\n%s", got[1:], want)
		}
	})
}
