package rulesfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/rulesfile"
)

func TestParseGood(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want []proxy.Rule
	}{
		{name: "empty file", file: ""},
		{name: "only comments", file: "# nothing yet\n"},
		{name: "null rules", file: "rules:\n"},
		{name: "empty list", file: "rules: []\n"},
		{name: "empty top-level list", file: "[]\n"},
		{
			name: "every field",
			file: `# what the command's doc shows
rules:
  - client: my-controller
    resource: configmaps
    namespace: default
    name: demo
    types: [MODIFIED, DELETED]
    action: hold
    from: 0s
    to: 3s
  - client: my-controller
    action: cut
    verbs: [update, patch]
    subresource: status
    after: 2
  - action: rewind
    resource: widgets
    ago: 1.5s
    from: 1m
  - action: rewind
    resourceVersion: 12345
  - action: delay
    delay: 500ms
    to: 2m30s
  - action: expire
  - action: break
    types: [BOOKMARK]
  - action: drop
    name: "0"
  - action: freeze
    subresource: "-"
    from: 0
  - action: reject
    code: 503
    verbs: [create]
  - action: slow
    delay: 2s
  - action: lose
    after: 1
  - action: reset
`,
			want: []proxy.Rule{
				{Client: "my-controller", Resource: "configmaps", Namespace: "default", Name: "demo", Types: []string{"MODIFIED", "DELETED"}, Action: proxy.Hold, To: 3 * time.Second},
				{Client: "my-controller", Action: proxy.Cut, Verbs: []string{"update", "patch"}, Subresource: "status", After: 2},
				{Action: proxy.Rewind, Resource: "widgets", Ago: 1500 * time.Millisecond, From: time.Minute},
				{Action: proxy.Rewind, ResourceVersion: "12345"},
				{Action: proxy.Delay, Delay: 500 * time.Millisecond, To: 150 * time.Second},
				{Action: proxy.Expire},
				{Action: proxy.Break, Types: []string{"BOOKMARK"}},
				{Action: proxy.Drop, Name: "0"},
				{Action: proxy.Freeze, Subresource: "-"},
				{Action: proxy.Reject, Code: 503, Verbs: []string{"create"}},
				{Action: proxy.Slow, Delay: 2 * time.Second},
				{Action: proxy.Lose, After: 1},
				{Action: proxy.Reset},
			},
		},
		{
			name: "top-level list, nulls, anchors",
			file: `- &held
  client: watcher
  resource: configmaps
  types: [MODIFIED]
  action: hold
  to: 3s
  namespace: ~
- *held
- client: other
  action:
`,
			want: []proxy.Rule{
				{Client: "watcher", Resource: "configmaps", Types: []string{"MODIFIED"}, Action: proxy.Hold, To: 3 * time.Second},
				{Client: "watcher", Resource: "configmaps", Types: []string{"MODIFIED"}, Action: proxy.Hold, To: 3 * time.Second},
				{Client: "other"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rulesfile.Parse("rules.yaml", []byte(tc.file))
			if err != nil {
				t.Fatalf("file %q: want no error, got %v", tc.file, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("file %q: rules (-want +got):\n%s", tc.file, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want []string // every line of the error, in order
	}{
		{
			name: "unknown field with a suggestion",
			file: "rules:\n  - client: a\n    acton: hold\n    to: 1s\n",
			want: []string{`rules.yaml:3: rule 1: field "acton" not known (did you mean "action"?)`},
		},
		{
			name: "Go field name",
			file: "rules:\n  - Action: hold\n    ResourceVersion: 7\n",
			want: []string{
				`rules.yaml:2: rule 1: field "Action" not known (did you mean "action"?)`,
				`rules.yaml:3: rule 1: field "ResourceVersion" not known (did you mean "resourceVersion"?)`,
			},
		},
		{
			name: "unknown field without a suggestion",
			file: "- colour: red\n",
			want: []string{`rules.yaml:1: rule 1: field "colour" not known (want one of client, resource, namespace, name, types, verbs, subresource, from, to, action, delay, code, ago, resourceVersion, after)`},
		},
		{
			name: "unknown action",
			file: "rules:\n  - client: a\n  - client: b\n  - action: hodl\n",
			want: []string{`rules.yaml:4: rule 3: action "hodl": want one of delay, hold, drop, break, expire, rewind, freeze, cut, lose, reset, slow, reject`},
		},
		{
			name: "action in capitals",
			file: "- action: Hold\n  to: 1s\n",
			want: []string{`rules.yaml:1: rule 1: action "Hold": want one of delay, hold, drop, break, expire, rewind, freeze, cut, lose, reset, slow, reject`},
		},
		{
			name: "bad duration",
			file: "# header\n\nrules:\n  - to: 3x\n",
			want: []string{`rules.yaml:4: rule 1: to: time: unknown unit "x" in duration "3x"`},
		},
		{
			name: "duration without a unit",
			file: "- action: delay\n  delay: 3\n",
			want: []string{`rules.yaml:2: rule 1: delay: time: missing unit in duration "3"`},
		},
		{
			name: "duration not a scalar",
			file: "- from: [1s]\n",
			want: []string{`rules.yaml:1: rule 1: from: want a duration such as 1.5s, got a list`},
		},
		{
			name: "Validate: a code no apiserver rejects a write with",
			file: "- action: reject\n  code: 418\n- action: lose\n  code: 504\n",
			want: []string{`rules.yaml:1: rule 1: reject: code 418: want one of [429 500 503]`, `rules.yaml:3: rule 2: lose: Code applies to reject only`},
		},
		{
			name: "Validate: hold without an end",
			file: "rules:\n  - client: a\n    action: hold\n    from: 1s\n",
			want: []string{`rules.yaml:2: rule 1: hold needs a window end (To)`},
		},
		{
			name: "Validate: empty window",
			file: "- action: drop\n- action: delay\n  from: 2s\n  to: 1s\n",
			want: []string{`rules.yaml:2: rule 2: window t+2s–1s is empty`},
		},
		{
			name: "Validate: selectors that do not fit the action",
			file: "- action: expire\n  types: [ADDED]\n- action: hold\n  to: 1s\n  verbs: [update]\n- action: drop\n  ago: 1s\n",
			want: []string{
				`rules.yaml:1: rule 1: expire acts on requests: event Types do not apply`,
				`rules.yaml:3: rule 2: hold: Verbs and Subresource apply to freeze and cut only`,
				`rules.yaml:6: rule 3: drop: Ago and ResourceVersion apply to rewind only`,
			},
		},
		{
			name: "unknown event type and verb",
			file: "- types: [MODIFED]\n- action: cut\n  verbs:\n    - update\n    - put\n",
			want: []string{
				`rules.yaml:1: rule 1: types: "MODIFED": want one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR`,
				`rules.yaml:5: rule 2: verbs: "put": want one of create, update, patch, delete, deletecollection`,
			},
		},
		{
			name: "list given as a scalar",
			file: "- types: MODIFIED\n",
			want: []string{`rules.yaml:1: rule 1: types: want a list (types: [MODIFIED]), got "MODIFIED"`},
		},
		{
			name: "string given as a mapping",
			file: "- name: {a: b}\n",
			want: []string{`rules.yaml:1: rule 1: name: want a string, got a mapping`},
		},
		{
			name: "negative or non-integer after",
			file: "- after: -1\n- after: 1.5\n",
			want: []string{
				`rules.yaml:1: rule 1: after: want a non-negative integer, got "-1"`,
				`rules.yaml:2: rule 2: after: want a non-negative integer, got "1.5"`,
			},
		},
		{
			name: "field given twice",
			file: "- name: a\n  action: drop\n  name: b\n",
			want: []string{`rules.yaml:3: rule 1: field "name" given twice (first on line 1)`},
		},
		{
			name: "rule not a mapping",
			file: "rules:\n  - hold configmaps\n  -\n",
			want: []string{
				`rules.yaml:2: rule 1: want a mapping of fields, got "hold configmaps"`,
				`rules.yaml:3: rule 2: empty rule: want a mapping of fields (client, resource, namespace, name, types, verbs, subresource, from, to, action, delay, code, ago, resourceVersion, after)`,
			},
		},
		{
			name: "unknown top-level key",
			file: "rules: []\nrulez: []\n",
			want: []string{`rules.yaml:2: field "rulez" not known at the top level (want only "rules")`},
		},
		{
			name: "rules not a list",
			file: "rules:\n  action: hold\n",
			want: []string{`rules.yaml:2: rules: want a list of rules, got a mapping`},
		},
		{
			name: "top level a scalar",
			file: "hold\n",
			want: []string{`rules.yaml:1: want a list of rules, or a mapping with the key "rules", got "hold"`},
		},
		{
			name: "two documents",
			file: "- action: drop\n---\n- action: drop\n",
			want: []string{`rules.yaml:2: more than one YAML document: want one`},
		},
		{
			name: "not YAML",
			file: "rules:\n  - client: [a\n",
			want: []string{`rules.yaml:1: not valid YAML: did not find expected ',' or ']'`},
		},
		{
			name: "every problem reported",
			file: "rules:\n  - acton: hold\n  - action: hold\n    to: 3x\n  - action: hold\n    from: 1s\n",
			want: []string{
				`rules.yaml:2: rule 1: field "acton" not known (did you mean "action"?)`,
				`rules.yaml:4: rule 2: to: time: unknown unit "x" in duration "3x"`,
				`rules.yaml:5: rule 3: hold needs a window end (To)`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := rulesfile.Parse("rules.yaml", []byte(tc.file))
			if err == nil {
				t.Fatalf("file %q: want errors %q, got rules %v", tc.file, tc.want, rules)
			}
			if rules != nil {
				t.Errorf("file %q: want no rules with an error, got %v", tc.file, rules)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("file %q: error lines (-want +got):\n%s", tc.file, diff)
			}
			var fe *rulesfile.Error
			if !errors.As(err, &fe) || fe.File != "rules.yaml" || fe.Line == 0 {
				t.Errorf("file %q: want a *rulesfile.Error with file and line, got %#v", tc.file, err)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	_, err := rulesfile.Parse("r.yaml", []byte("- client: a\n- acton: hold\n  to: 2x\n"))
	var got []rulesfile.Error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *rulesfile.Error
		if !errors.As(e, &fe) {
			t.Fatalf("want *rulesfile.Error, got %T %v", e, e)
		}
		got = append(got, rulesfile.Error{File: fe.File, Line: fe.Line, Rule: fe.Rule, Field: fe.Field})
	}
	want := []rulesfile.Error{{File: "r.yaml", Line: 2, Rule: 2, Field: "acton"}, {File: "r.yaml", Line: 3, Rule: 2, Field: "to"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if !errors.Is(err, rulesfile.ErrUnknownField) {
		t.Errorf("error %v: want it to wrap ErrUnknownField", err)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("- action: hold\n  to: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := rulesfile.Read(path)
	if err != nil || len(rules) != 1 || rules[0].Action != proxy.Hold {
		t.Errorf("Read(%s): want one hold rule, got %v, %v", path, rules, err)
	}

	missing := filepath.Join(dir, "missing.yaml")
	_, err = rulesfile.Read(missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), missing+": unable to read rules file: ") {
		t.Errorf("Read(%s): want a not-exist error naming the file, got %v", missing, err)
	}
}
