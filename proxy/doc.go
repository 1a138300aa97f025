// Package proxy is the informer proxy: an HTTP proxy in front of a real
// kube-apiserver that delays, holds or drops individual watch events per
// client, so that a controller's informer cache goes stale while every write
// it makes still meets the real apiserver, and every 409 Conflict it gets is
// genuine.
//
// # Contract
//
// Everything that is not a watch passes through untouched: method, path,
// query, headers and body, writes included. Responses flush immediately. A
// response (up to 4 MiB) is recorded in the trace before its first byte
// reaches the client, so a client that has its answer can read it in the
// trace.
//
// A watch stream is read from the apiserver eagerly, whether or not the
// client reads, so the apiserver's watcher never stalls. Each event is parsed
// just enough to match rules (type, kind, namespace, name, resourceVersion,
// the k8s.io/initial-events-end bookmark annotation), from JSON frames and
// from protobuf frames (application/vnd.kubernetes.protobuf;stream=watch),
// and the client receives the original bytes, never re-serialized. For every
// client and stream:
//
//   - the events a client receives are a subsequence of those the apiserver
//     sent, in the same order: nothing overtakes a held event, not later
//     events, not BOOKMARKs, not ERRORs;
//   - an event a Drop rule matches is never forwarded, and the stream stays
//     open;
//   - an event no rule matches is forwarded as soon as everything before it
//     has been;
//   - a Delay rule releases an event at max(release of the previous event,
//     arrival + Delay), so order is kept and delays do not add up; a Hold
//     rule releases it when the rule's window ends.
//
// A stream the proxy cannot parse (an unknown media type, a frame over
// MaxFrame, malformed bytes) is forwarded byte for byte without delay from the
// first byte it cannot parse, and a warning is logged.
//
// Rules apply to the WatchList initial-events phase too (client-go 0.35+
// informers start with ADDED events ending in a BOOKMARK annotated
// k8s.io/initial-events-end). Delaying or holding those delays the informer's
// sync, since the bookmark waits behind them; it does not make an already
// synced cache stale. To make a cache stale, set rules after it has synced.
//
// # Client identity
//
// Each named client gets its own listener on 127.0.0.1, and everything
// arriving on that listener is that client's. A listener per client needs
// nothing from the client but a server URL, so the same identity works for an
// in-process controller (Client.Config) and for an out-of-process one in any
// language (Client.Kubeconfig): a path prefix is mishandled by some clients,
// and a header cannot be set through a plain kubeconfig. Clients speak plain
// HTTP to the proxy, which adds the upstream credentials; the listeners are on
// loopback only.
//
// # Trace
//
// Every request (client, verb, object, status code, latency, resourceVersion
// sent and returned) and every watch event (arrival, release or drop) is
// recorded in Proxy.Trace; see package trace. No credentials are recorded.
//
// # Lifecycle
//
// Stop closes every listener and stream and returns only when every goroutine
// the proxy started has ended.
//
// Package proxy reads no environment variables.
package proxy
