// Package proxy is the informer proxy: an HTTP proxy in front of a real
// kube-apiserver that delays, holds, drops or breaks individual watch streams
// per client, expires re-watches, serves lists from the past and stops a
// client between two writes, so that a controller's informer cache goes stale
// while every write it makes still meets the real apiserver, and every 409
// Conflict it gets is genuine.
//
// # Contract
//
// Everything that is not a watch passes through untouched (unless a rule
// below says otherwise): method, path, query, headers and body, writes
// included, and the apiserver's answer comes back as it sent it. Responses
// flush immediately. A response is recorded in the trace before its first
// byte reaches the client (all but an API object over 4 MiB), so a client
// that has its answer can read it in the trace:
//
//   - a finite API object (the answer to a get, list, create, update, patch
//     or delete of a resource, or of a subresource that is an object such as
//     status or scale, in a media type the apiserver encodes objects in:
//     JSON, YAML, protobuf, CBOR) of up to 4 MiB is held whole, recorded with
//     its resourceVersion, then forwarded. Its resourceVersion and
//     Proxy.Fields are read from a decompressed copy when the apiserver
//     gzipped it (it does for responses over 128 KiB to clients that accept
//     gzip, as Go clients do: every large informer list), up to 4 MiB
//     decompressed; the client gets the original bytes. A larger one is
//     forwarded as it arrives, and recorded without its resourceVersion when
//     it ends;
//   - every other response (a log, follow=true included; pod, service and
//     node proxy traffic; exec, attach and port-forward; non-resource paths
//     such as discovery) is recorded when its headers arrive, with the
//     latency until then, and flows to the client as it arrives, never held
//     back.
//
// A request that switches protocols (exec, attach and port-forward, over SPDY
// or WebSocket; a WebSocket through a pod or service proxy) reaches the
// apiserver over HTTP/1.1, since HTTP/2 has no Upgrade. Its answer comes back
// as the apiserver sent it: a refusal (a Status: envtest, without a kubelet,
// refuses every exec) like any other response, or 101 Switching Protocols,
// recorded with Code 101 when it arrives, after which the proxy relays the
// connection's bytes both ways, untouched and unrecorded, until either end
// closes it or Stop does.
//
// A watch stream is read from the apiserver eagerly, whether or not the
// client reads, so the apiserver's watcher never stalls. The proxy asks for
// it uncompressed (Accept-Encoding: identity, which every client accepts),
// the one change it makes to a watch request besides the credentials. Each event is parsed
// just enough to match rules (type, kind, namespace, name, resourceVersion,
// the k8s.io/initial-events-end bookmark annotation), from JSON frames and
// from protobuf frames (application/vnd.kubernetes.protobuf;stream=watch),
// and the client receives the original bytes, never re-serialized. In a
// watch that asks for Table output (kubectl get -w), each event's object is a
// Table of one row, and the namespace, name and resourceVersion that rules
// and the trace see are those of the row's object. For every client and
// stream:
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
//     rule releases it when the rule's window ends;
//   - a Break rule ends the stream just before the first event it matches:
//     the events before it are released in order, then the stream ends
//     cleanly; that event and everything after it on that stream are never
//     forwarded (the client's re-watch gets them from the apiserver).
//
// # Faults and what causes them in a real cluster
//
// Every action is labelled with what does the same in a real cluster, or
// says that nothing does (see Action):
//
//	Delay, Hold  a slow apiserver, network or client: events arrive late
//	Drop         nothing: a real watch never loses an event silently
//	Break        a watch timeout, an apiserver restart, a load balancer reset
//	Expire       compaction, a watch cache that no longer holds the version
//	Rewind       a LIST served by an apiserver whose watch cache lags etcd
//	Cut          a controller killed between sending a write and its answer
//	Freeze       nothing by itself: it stops a client between two writes so
//	             that a harness can kill it there
//	Lose         the apiserver's request timeout (504) while etcd or a
//	             webhook is slow: applied, the client told it may not be
//	Reset        a connection reset after a write was sent: applied, the
//	             client gets a transport error
//	Slow         a slow way back for an answer already committed: its watch
//	             event can arrive first
//	Reject       API Priority and Fairness's 429, etcd's request timeout
//	             (500), a restarting apiserver's 503: never applied
//
// Expire and Rewind act on requests. Expire answers a matching re-watch
// itself, with the ERROR event a kube-apiserver sends for a resourceVersion
// its watch cache no longer holds (byte for byte, in the client's media
// type); it never touches WatchList requests, which a real apiserver never
// answers with 410. Rewind rewrites a matching LIST that allows a stale
// answer (one with a resourceVersion: "0", the reflector's, or "not older
// than" one; never a consistent LIST, which has none) to
// resourceVersion=R&resourceVersionMatch=Exact, so that the real apiserver
// serves genuine old state from etcd, and refuses a matching WatchList
// request with the 422 a kube-apiserver without the WatchList feature sends,
// which makes client-go fall back to LIST. R is the rule's ResourceVersion,
// or the newest resourceVersion the proxy had seen, in any response or watch
// event, at the moment the rule names. Freeze, Cut, Lose, Reset, Slow and
// Reject act on writes (never on dry runs, which change nothing); each fires
// at most once per rule and client. After a Freeze or Cut the client's
// requests are held unanswered, never forwarded, until it goes away or
// Proxy.Thaw; after the others it keeps running. An answer a client never
// got is still recorded as the apiserver gave it (trace.Request.Unanswered),
// and a Slow answer says how long it was held (trace.Request.Held). Each such request is recorded
// with its trace.FaultKind (what code acts on) and a Fault that says in
// words what was done.
//
// Two facts of client-go v0.37's reflector shape what these faults do: a
// watch that ends less than a second after it began without delivering an
// event makes it relist rather than re-watch (VeryShortWatchError), and after
// a 410 it relists only after its backoff (0.8 s, doubling, with jitter), so
// the states between the last event it saw and that list are never observed.
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
// # Client identity, and who may use the upstream's
//
// Each named client gets its own listener on 127.0.0.1, and everything
// arriving on that listener is that client's. A listener per client needs
// nothing from the client but a server URL and a token, so the same identity
// works for an in-process controller (Client.Config) and for an
// out-of-process one in any language (Client.Kubeconfig): a path prefix is
// mishandled by some clients, and a header cannot be set through a plain
// kubeconfig. Clients speak HTTP/1.1 over TLS to the proxy, which serves a
// certificate of its own for 127.0.0.1 that Config and Kubeconfig trust
// (CAData): client-go sends a kubeconfig's credentials to https servers
// only. A caller that gives Config a Transport of its own must trust CAData
// there.
//
// The proxy forwards every request with the upstream's credentials
// (Proxy.Upstream): whoever gets a request through a listener acts on the
// apiserver as that identity, with whatever it may do (in envtest and in a
// kind cluster's admin kubeconfig, everything: system:masters), including
// impersonating others with Impersonate-* headers, which pass through. So a
// listener admits only its own client: each client has a random bearer
// token of 256 bits, carried by its Config and Kubeconfig, which the proxy
// checks (in constant time) and strips before forwarding; a request without
// it is answered 401 Unauthorized, as an apiserver answers one, and never
// forwarded. A request whose Host header is not the listener's loopback
// address (127.0.0.1, ::1 or localhost with its port) is refused with 403
// Forbidden, so that a web page cannot reach a listener through DNS
// rebinding. Any process of the same user can still read a kubeconfig the
// proxy wrote (mode 0600) or a test's memory: the listeners guard against
// other users, web pages and processes without the token.
//
// # Trace
//
// Every request (client, verb, object, status code, latency, resourceVersion
// sent and returned, whether it asked for a dry run: dryRun=All in the query,
// or in a delete's DeleteOptions body) and every watch event (arrival,
// release or drop) is recorded in Proxy.Trace; see package trace.
//
// No credentials are recorded. The proxy adds the upstream's own to each
// request and records neither them nor a client's Authorization header, and
// every value it records from a body (what a write sets, trace.Write.Set,
// and Proxy.Fields of a response) passes through package redact first, in
// every write form the proxy reads: create and update in JSON or protobuf,
// merge, strategic-merge and JSON patch, server-side apply in YAML or JSON. Redacted are a Secret's data and
// stringData (whole or per key) and its last-applied-configuration
// annotation, a TokenRequest's spec and status.token, a TokenReview's
// spec.token, and in any resource a PEM private key, a JSON Web Token or a
// kubeconfig, as text, inside YAML or JSON text, or base64-encoded. Each is
// replaced by "redacted:" and 12 hex digits of an HMAC-SHA256 under a key
// drawn at random once per process: equal values stay equal (the lost-update
// oracle and the audit's blind-write check compare them across writes), and
// nothing in a saved trace gives a value back or lets a guess be checked.
//
// The trace is kept in memory until its Reset; a proxy that runs for long
// bounds it with Proxy.Trace().Spill, which writes each entry to a file once
// it is final.
//
// # Lifecycle
//
// Stop closes every listener, stream and connection, upgraded ones included,
// and returns only when every goroutine the proxy started has ended; it waits
// for no client.
//
// Package proxy reads no environment variables.
package proxy
