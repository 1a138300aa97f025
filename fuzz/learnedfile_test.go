package fuzz

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLearnedFileRoundTrip: what the coordinator learned reads back into a
// worker unchanged (a wholly masked object stays wholly masked), a setting
// whose reference runs were not clean is left for the worker to learn, and a
// file of another scenario is refused.
func TestLearnedFileRoundTrip(t *testing.T) {
	s := Scenario{Name: "learn", Counts: []Count{{}}, EndStates: []EndState{{}}}
	ref := &learned{
		counts:  []map[string]int{{"Owner": 2}},
		ends:    []endReference{{objects: endObjects{"a": {"spec.x": "1"}, "b": {"spec.y": "2"}}, masked: map[string]map[string]bool{"a": {"status.t": true}, "b": nil}}},
		widened: true, settled: true,
		rewritten: map[string]bool{"configmaps/data.k": true},
	}
	w := &Env{s: s, learnedRefs: map[string]*learned{"map[]": ref, "map[k:1]": nil}}
	path := filepath.Join(t.TempDir(), "learned.json")
	if err := w.writeLearned(path); err != nil {
		t.Fatal(err)
	}
	r := &Env{s: s, learnedRefs: map[string]*learned{}}
	n, err := r.readLearned(path)
	if err != nil || n != 1 {
		t.Fatalf("readLearned: %d settings, %v; want 1", n, err)
	}
	if got := r.learnedRefs["map[]"]; !reflect.DeepEqual(got, ref) {
		t.Errorf("read back %+v, wrote %+v", got, ref)
	}
	if m, ok := r.learnedRefs["map[]"].ends[0].masked["b"]; !ok || m != nil {
		t.Errorf("object b was wholly masked; read back %v (present %v)", m, ok)
	}
	if _, ok := r.learnedRefs["map[k:1]"]; ok {
		t.Error("a setting whose references were not clean was read as learned: the worker would never judge it")
	}
	other := &Env{s: Scenario{Name: "other", Counts: []Count{{}}, EndStates: []EndState{{}}}, learnedRefs: map[string]*learned{}}
	if _, err := other.readLearned(path); err == nil || !strings.Contains(err.Error(), `scenario "learn"`) {
		t.Errorf("another scenario's file: got %v, want it refused", err)
	}
	if n, err := r.readLearned(filepath.Join(t.TempDir(), "absent.json")); n != 0 || err != nil {
		t.Errorf("no file: %d, %v; want 0, nil", n, err)
	}
}
