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
// audit and the engine's waits use that definition. A restart (Restart,
// recorded by whoever restarts the client) ends what the client has seen:
// its new instance starts with nothing. Which resources a client reads at
// all is defined here too (Readers): one it never reads has no view of it.
//
// The trace is what makes a finding explainable: a write's SentRV against the
// ResourceVersion of the events released to that client before the write says
// whether the writer's view was stale and whether the write was guarded by an
// optimistic lock (SentRV non-empty).
//
// # Memory
//
// The zero Log keeps everything in memory until Reset, which the fuzz engine
// calls between executions; Next, Since and NextReleased read it with
// cursors. A Log that lives long (the standalone proxy in front of a busy
// cluster, where it would grow by about 270 bytes a watch event) is bounded
// by Spill: each entry is written to a file as JSONL once it is final (a
// request or a rule change when recorded, a watch event once its fate is no
// longer Pending), and memory keeps only the events still pending and up to
// SpillBuffer bytes not yet written. Nothing is dropped: an entry that
// cannot be written yet stays in memory until a write succeeds, and
// Log.WriteJSONL writes the whole trace (the file, then what is in memory).
// The file's lines are in the order entries became final, not in time
// order; ReadJSONL reads any order and Trace.Entries orders them. A bounded
// Log's Next, Since and NextReleased see only what it still holds.
//
// Package trace reads no environment variables.
package trace
