// Package rulesfile reads proxy rules from a YAML file, so that the rules of
// a standalone proxy (the stalefuzz command) can be written, reviewed and
// reloaded without Go.
//
// # Format
//
// The file is one YAML document: a sequence of rules, or a mapping whose only
// key is rules, holding that sequence. An empty file, or an empty or null
// sequence, holds no rules. Each rule is a mapping whose keys mirror the
// fields of proxy.Rule in lowerCamel case; every key is optional, and an
// absent (or null) key means the field's zero value:
//
//	rules:
//	  - client: my-controller       # Rule.Client
//	    resource: configmaps        # Rule.Resource
//	    namespace: default          # Rule.Namespace
//	    name: demo                  # Rule.Name
//	    types: [MODIFIED]           # Rule.Types: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
//	    action: hold                # delay, hold, drop, break, expire, rewind, freeze, cut,
//	                                # lose, reset, slow, reject
//	    from: 0s                    # Rule.From, a Go duration
//	    to: 3s                      # Rule.To
//	  - action: cut
//	    verbs: [update, patch]      # Rule.Verbs: create, update, patch, delete, deletecollection
//	    subresource: status         # Rule.Subresource ("-": the main resource only)
//	    after: 2                    # Rule.After, a non-negative integer
//	  - action: rewind
//	    ago: 1.5s                   # Rule.Ago
//	    resourceVersion: "12345"    # Rule.ResourceVersion
//	  - action: delay
//	    delay: 500ms                # Rule.Delay (of a delay or a slow)
//	  - action: reject
//	    code: 503                   # Rule.Code: 429 (the default), 500, 503
//
// Durations are Go duration strings (time.ParseDuration: "1.5s", "300ms",
// "2m"); a bare 0 is zero. Action names are lowercase, event types uppercase
// and verbs lowercase, spelled exactly as above. String fields take any
// scalar (a resourceVersion may be written unquoted). Rules keep their order:
// the first rule of the right kind that matches decides, as in proxy.Rule.
//
// # Contract
//
// Parse returns either every rule of the file, each of which passes
// proxy.Rule.Validate, or an error and no rules; it never returns part of a
// file. Parsing is strict: a key that is not a field, a key given twice, a
// value of the wrong shape, an unknown action, event type or verb, and a rule
// that proxy.Rule.Validate refuses are all errors. Every problem in the file
// is reported (errors.Join of *Error values), each naming the file, the line
// of the offending key or value (for a Validate error, the rule's first
// line), the rule, and the field:
//
//	rules.yaml:7: rule 2: field "acton" not known (did you mean "action"?)
//	rules.yaml:9: rule 3: action "hodl": want one of delay, hold, drop, break, expire, rewind, freeze, cut, lose, reset, slow, reject
//	rules.yaml:4: rule 1: to: time: invalid duration "3x"
//
// Rules are numbered from 1, in file order, in messages; the proxy numbers the
// same rules from 0 (trace.Event.Rule, trace.Request.Rule are N−1).
//
// Package rulesfile reads no environment variables.
package rulesfile
