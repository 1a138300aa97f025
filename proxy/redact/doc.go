// Package redact keeps credentials out of the trace: it decides which values
// of an API object the proxy must not record, and what it records in their
// place.
//
// Value is applied to every value the proxy records from a body: what a
// write sets (trace.Write.Set, from a create's or update's object in JSON or
// protobuf, a merge, strategic-merge or JSON patch, a server-side apply
// configuration in YAML or JSON) and what a response holds at Proxy.Fields
// (trace.Request.Fields). A value is redacted when
//
//   - its path is one of these, or lies under one, for the resource the
//     request addressed (core group unless named):
//     secrets: data, stringData, and the annotation
//     kubectl.kubernetes.io/last-applied-configuration (client-side kubectl
//     apply copies the whole Secret into it);
//     serviceaccounts/token (TokenRequest): spec and status.token;
//     authentication.k8s.io tokenreviews (TokenReview): spec.token.
//     A value at a path above one of these (data's parent, the object root,
//     a list's items) keeps its shape with the part below redacted: a JSON
//     patch that replaces /data with {"password": "..."} is recorded as
//     {"password": "redacted:..."};
//   - or, in any resource at any path, it holds (as a string, nested in an
//     object or list, inside YAML or JSON text, or base64-encoded) a PEM
//     private key (-----BEGIN ... PRIVATE KEY-----), a JSON Web Token (the
//     form of every ServiceAccount token), or a kubeconfig: text or an
//     object with client-key-data or client-certificate-data, kind Config
//     with clusters, users or contexts, or a user entry (a name and a user
//     holding a token, password, client key or certificate, auth-provider
//     or exec). The smallest such part is replaced: the string, or the
//     kubeconfig object.
//
// A null (a field removed) is kept: it reveals nothing.
//
// The replacement is the string "redacted:" followed by the first 12 hex
// digits of HMAC-SHA256 of the value's JSON encoding (object keys sorted),
// under a key of 32 random bytes drawn once per process. So, within one
// process, equal values are replaced by equal strings and different values
// by different ones (up to a 48-bit collision), and the oracles that compare
// values across writes (a lost update, a blind write over an unseen change)
// judge redacted values as they would the originals. The key is never
// written anywhere, so a saved trace gives no way to test a guess ("is the
// password hunter2?") offline, as an unkeyed digest would; the price is that
// replacements from two processes do not compare.
//
// The key is the package's only state, set at init and never changed: it is
// per process rather than per proxy or per call so that every trace a
// process writes (a fuzz campaign's executions, each with its own trace)
// compares values the same way.
//
// Package redact reads no environment variables.
package redact
