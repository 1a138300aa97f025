package rulesfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stalefuzz/stalefuzz/proxy"
	suggestpkg "github.com/stalefuzz/stalefuzz/proxy/suggest"
)

// Error is one problem in a rules file.
type Error struct {
	// File is the name the file was parsed under.
	File string
	// Line is the 1-based line of the offending key or value; 0 when the
	// file could not be read or parsed as YAML at all.
	Line int
	// Rule is the 1-based index of the rule, in file order; 0 for a problem
	// with the file as a whole.
	Rule int
	// Field is the key the problem is about (as written); empty for the
	// rule or the file as a whole.
	Field string
	// Err is what is wrong.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Rule > 0 {
		fmt.Fprintf(&b, "rule %d: ", e.Rule)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrUnknownField is wrapped by the Error of a key that is not a rule field.
var ErrUnknownField = errors.New("field not known")

// unknownField is an ErrUnknownField with its own message.
type unknownField string

func (e unknownField) Error() string { return string(e) }
func (e unknownField) Unwrap() error { return ErrUnknownField }

// Read reads and parses the rules file at path; errors name the file by path.
func Read(path string) ([]proxy.Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("unable to read rules file: %w", err)}
	}
	return Parse(path, b)
}

// Parse parses a rules file's contents; name is what errors call the file.
func Parse(name string, data []byte) ([]proxy.Rule, error) {
	p := &parser{file: name}
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil // empty file: no rules
	case err != nil:
		return nil, syntaxError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: name, Line: extra.Line, Err: errors.New("more than one YAML document: want one")}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(name, err)
	}
	var seq *yaml.Node
	top := resolve(doc.Content[0])
	switch {
	case isNull(top):
		return nil, nil
	case top.Kind == yaml.SequenceNode:
		seq = top
	case top.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(top.Content); i += 2 {
			k, v := top.Content[i], resolve(top.Content[i+1])
			if k.Value != "rules" {
				p.add(k.Line, 0, k.Value, unknownField(fmt.Sprintf("field %q not known at the top level (want only %q)", k.Value, "rules")))
				continue
			}
			if seq != nil {
				p.errorf(k.Line, 0, k.Value, "key %q given twice", k.Value)
				continue
			}
			switch {
			case isNull(v):
				seq = &yaml.Node{Kind: yaml.SequenceNode}
			case v.Kind == yaml.SequenceNode:
				seq = v
			default:
				p.errorf(v.Line, 0, k.Value, "rules: want a list of rules, got %s", describe(v))
			}
		}
	default:
		p.errorf(top.Line, 0, "", "want a list of rules, or a mapping with the key %q, got %s", "rules", describe(top))
	}
	var rules []proxy.Rule
	if seq != nil {
		for i, n := range seq.Content {
			rules = append(rules, p.rule(i+1, resolve(n)))
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return rules, nil
}

type parser struct {
	file string
	errs []error
}

func (p *parser) errorf(line, rule int, field, format string, args ...any) {
	p.add(line, rule, field, fmt.Errorf(format, args...))
}

func (p *parser) add(line, rule int, field string, err error) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Rule: rule, Field: field, Err: err})
}

// fields are the keys of a rule, in proxy.Rule's order.
var fields = []string{
	"client", "resource", "namespace", "name", "types", "verbs", "subresource",
	"from", "to", "action", "delay", "code", "ago", "resourceVersion", "after",
}

var actions = []proxy.Action{
	proxy.Delay, proxy.Hold, proxy.Drop, proxy.Break, proxy.Expire, proxy.Rewind, proxy.Freeze, proxy.Cut,
	proxy.Lose, proxy.Reset, proxy.Slow, proxy.Reject,
}

var (
	eventTypes = []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"}
	writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
)

// rule decodes one rule; problems are recorded in p.errs.
func (p *parser) rule(idx int, n *yaml.Node) proxy.Rule {
	var r proxy.Rule
	if isNull(n) {
		p.errorf(n.Line, idx, "", "empty rule: want a mapping of fields (%s)", strings.Join(fields, ", "))
		return r
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, idx, "", "want a mapping of fields, got %s", describe(n))
		return r
	}
	before := len(p.errs)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		key := k.Value
		if first, dup := seen[key]; dup {
			p.errorf(k.Line, idx, key, "field %q given twice (first on line %d)", key, first)
			continue
		}
		seen[key] = k.Line
		if !slices.Contains(fields, key) {
			if s := suggest(key); s != "" {
				p.add(k.Line, idx, key, unknownField(fmt.Sprintf("field %q not known (did you mean %q?)", key, s)))
			} else {
				p.add(k.Line, idx, key, unknownField(fmt.Sprintf("field %q not known (want one of %s)", key, strings.Join(fields, ", "))))
			}
			continue
		}
		if isNull(v) {
			continue // the zero value
		}
		switch key {
		case "client":
			r.Client = p.str(idx, key, v)
		case "resource":
			r.Resource = p.str(idx, key, v)
		case "namespace":
			r.Namespace = p.str(idx, key, v)
		case "name":
			r.Name = p.str(idx, key, v)
		case "subresource":
			r.Subresource = p.str(idx, key, v)
		case "resourceVersion":
			r.ResourceVersion = p.str(idx, key, v)
		case "types":
			r.Types = p.strs(idx, key, v, eventTypes)
		case "verbs":
			r.Verbs = p.strs(idx, key, v, writeVerbs)
		case "from":
			r.From = p.duration(idx, key, v)
		case "to":
			r.To = p.duration(idx, key, v)
		case "delay":
			r.Delay = p.duration(idx, key, v)
		case "ago":
			r.Ago = p.duration(idx, key, v)
		case "action":
			r.Action = p.action(idx, key, v)
		case "after":
			r.After = p.count(idx, key, v)
		case "code":
			r.Code = p.count(idx, key, v)
		}
	}
	if len(p.errs) == before {
		if err := r.Validate(); err != nil {
			p.errorf(n.Line, idx, "", "%w", err)
		}
	}
	return r
}

func (p *parser) str(idx int, key string, v *yaml.Node) string {
	if v.Kind != yaml.ScalarNode {
		p.errorf(v.Line, idx, key, "%s: want a string, got %s", key, describe(v))
		return ""
	}
	return v.Value
}

func (p *parser) strs(idx int, key string, v *yaml.Node, allowed []string) []string {
	if v.Kind != yaml.SequenceNode {
		p.errorf(v.Line, idx, key, "%s: want a list (%s: [%s]), got %s", key, key, allowed[1], describe(v))
		return nil
	}
	var out []string
	for _, e := range v.Content {
		e = resolve(e)
		if e.Kind != yaml.ScalarNode || isNull(e) {
			p.errorf(e.Line, idx, key, "%s: want one of %s, got %s", key, strings.Join(allowed, ", "), describe(e))
			continue
		}
		if !slices.Contains(allowed, e.Value) {
			p.errorf(e.Line, idx, key, "%s: %q: want one of %s", key, e.Value, strings.Join(allowed, ", "))
			continue
		}
		out = append(out, e.Value)
	}
	return out
}

func (p *parser) duration(idx int, key string, v *yaml.Node) time.Duration {
	if v.Kind != yaml.ScalarNode {
		p.errorf(v.Line, idx, key, "%s: want a duration such as 1.5s, got %s", key, describe(v))
		return 0
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		p.errorf(v.Line, idx, key, "%s: %w", key, err)
		return 0
	}
	return d
}

func (p *parser) action(idx int, key string, v *yaml.Node) proxy.Action {
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = a.String()
		if v.Kind == yaml.ScalarNode && v.Value == a.String() {
			return a
		}
	}
	if v.Kind != yaml.ScalarNode {
		p.errorf(v.Line, idx, key, "action: want one of %s, got %s", strings.Join(names, ", "), describe(v))
	} else {
		p.errorf(v.Line, idx, key, "action %q: want one of %s", v.Value, strings.Join(names, ", "))
	}
	return 0
}

func (p *parser) count(idx int, key string, v *yaml.Node) int {
	n, err := strconv.Atoi(v.Value)
	if v.Kind != yaml.ScalarNode || err != nil || n < 0 {
		p.errorf(v.Line, idx, key, "%s: want a non-negative integer, got %s", key, describe(v))
		return 0
	}
	return n
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// suggest returns the field closest to an unknown key (a typo, or the Go
// field name), or "" when none is close.
func suggest(key string) string { return suggestpkg.Closest(key, fields, 2) }

// syntaxError attributes a yaml.v3 syntax error ("yaml: line 3: did not
// find expected key") to its line.
func syntaxError(file string, err error) *Error {
	e := &Error{File: file, Err: fmt.Errorf("not valid YAML: %w", err)}
	msg, ok := strings.CutPrefix(err.Error(), "yaml: line ")
	if !ok {
		return e
	}
	num, rest, ok := strings.Cut(msg, ": ")
	if n, aerr := strconv.Atoi(num); ok && aerr == nil {
		e.Line, e.Err = n, syntaxErr{msg: "not valid YAML: " + rest, err: err}
	}
	return e
}

// syntaxErr keeps yaml.v3's error while leaving its line out of the message.
type syntaxErr struct {
	msg string
	err error
}

func (e syntaxErr) Error() string { return e.msg }
func (e syntaxErr) Unwrap() error { return e.err }
