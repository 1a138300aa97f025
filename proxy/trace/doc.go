// Package trace is the proxy's record of what each client did and saw: every
// request it sent (verb, object, status code, latency, the resourceVersion it
// carried and the one it got back) and every watch event the apiserver sent it
// (when it arrived at the proxy, and when it was released to the client or
// that it was dropped).
//
// A Log is safe for concurrent use. It holds no credentials, certificates,
// tokens or object bodies: only the fields named here, whose values from
// object bodies the proxy redacts first (package proxy/redact). Its JSONL form (one
// Entry per line, requests and events merged in time order) is the stable
// interchange format that findings are saved in.
//
// What a client has seen of an object is defined once, here (Views, and
// Event.Shown and Request.Shown for those who poll): every oracle, the
// audit and the engine's waits use that definition.
//
// The trace is what makes a finding explainable: a write's SentRV against the
// ResourceVersion of the events released to that client before the write says
// whether the writer's view was stale and whether the write was guarded by an
// optimistic lock (SentRV non-empty).
//
// Package trace reads no environment variables.
package trace
