package truthtable

import (
	"strings"
	"testing"
	"time"

	"github.com/stalefuzz/stalefuzz/fuzz"
	"github.com/stalefuzz/stalefuzz/proxy"
)

func TestCells(t *testing.T) {
	known := []fuzz.Known{{Oracle: "count", Message: "live Jobs", Why: "finding 1: Jobs beyond maxReplicaCount (README.md)"}}
	var c Cell
	c.add(&fuzz.Result{}, nil)
	c.add(&fuzz.Result{Violations: []fuzz.Violation{{Oracle: "count", Message: "4 live Jobs"}}}, known)
	c.add(&fuzz.Result{Violations: []fuzz.Violation{{Oracle: "end-state", Message: "a"}, {Oracle: "end-state", Message: "b"}, {Oracle: "crash", Message: "c"}}}, nil)
	c.HarnessErrors = 2
	if got, want := c.String(), "**crash 1/3**, **end-state 1/3**, known (finding 1) 1/3, (2 harness errors)"; got != want {
		t.Errorf("cell %q, want %q", got, want)
	}
	if c.First["end-state"] != "a" {
		t.Errorf("first end-state message %q, want the first run's first", c.First["end-state"])
	}
	clean := Cell{Judged: 2}
	if got := clean.String(); got != "— 2/2" {
		t.Errorf("clean cell %q", got)
	}
	if got := (&Cell{HarnessErrors: 2}).String(); got != "not judged, (2 harness errors)" {
		t.Errorf("unjudged cell %q", got)
	}
	if got := (*Cell)(nil).String(); got != "n/a" {
		t.Errorf("missing cell %q", got)
	}
}

func TestMarkdown(t *testing.T) {
	relist := fuzz.Step{Client: "c", Resource: "jobs", Action: proxy.Expire, Length: time.Second, Lag: 300 * time.Millisecond}
	hold := fuzz.Step{Client: "c", Resource: "jobs", Action: proxy.Hold, Length: time.Second}
	tt := Table{
		Runs:     1,
		Settings: []map[string]int{{"mode": 0}, {"mode": 1}},
		Patterns: []Pattern{
			{Schedule: "no lag"},
			{Schedule: "a | b", Cause: relist.Cause(), OnDefaults: relist.OnDefaults()},
			{Schedule: "held", Cause: hold.Cause(), OnDefaults: hold.OnDefaults()},
		},
		Cells: map[string]map[int]*Cell{
			"no lag": {0: {Judged: 1}, 1: {Judged: 1}},
			"a | b":  {1: {Judged: 1, ByOracle: map[string]int{"count": 1}}},
			"held":   {0: {Judged: 1}, 1: {Judged: 1}},
		},
	}
	md := tt.Markdown(nil)
	for _, want := range []string{
		"| pattern | on 1.37's defaults | defaults | mode=1 |\n|---|---|---|---|\n",
		"| no lag | — | — 1/1 | — 1/1 |\n",
		`| a \| b | only without WatchList | n/a | **count 1/1** |` + "\n",
		"| held | yes | — 1/1 | — 1/1 |\n",
		"- " + relist.Cause() + "\n",
		"- " + hold.Cause() + "\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if got := (fuzz.Step{Action: proxy.Drop}).OnDefaults(); got != "no" {
		t.Errorf("a silent drop on 1.37's defaults: %q, want no", got)
	}
	if got := (fuzz.Step{Action: proxy.Freeze}).OnDefaults(); got != "yes" {
		t.Errorf("a restart onto a current apiserver on 1.37's defaults: %q, want yes", got)
	}
}
