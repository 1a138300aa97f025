// Package watchframe splits a Kubernetes apiserver watch response body into
// frames, one per watch event, and reads from each frame just enough metadata
// (event type, object kind, namespace, name, resourceVersion, end of the
// initial events) for the proxy to match it against its rules.
//
// # Guarantees
//
// A Frame's Raw holds exactly the bytes the Reader consumed from the stream
// for that event; it is never re-serialized. For any input whatsoever, the
// concatenation of every Frame.Raw that Next returns — including the Raw
// returned together with an error, and the one returned with io.EOF — followed
// by everything read from Rest reproduces the input byte for byte. A caller
// that forwards f.Raw before looking at the error, and on any error other than
// io.EOF copies Rest to its destination, therefore forwards the stream
// unmodified even when it cannot be parsed.
//
// No Frame.Raw is longer than maxFrame (see NewReader). A frame's buffer grows
// with the bytes actually received for it, never beyond maxFrame, whatever a
// length prefix claims; besides it the Reader holds one 32 KiB read buffer.
// Each Raw is newly allocated and owned by the caller.
//
// Next never returns a frame it could not parse: a frame that does not start
// with '{', is longer than maxFrame, is not valid JSON or protobuf, or is cut
// short by the end of the stream yields an error wrapping ErrMalformed (cut
// short also wraps io.ErrUnexpectedEOF). A protobuf frame is read only as
// deep as Meta needs (the event, its object's envelope and type, and the
// fields of its metadata that Meta holds; the rest is skipped by its
// length), so damage inside a field it skips is the client's to refuse;
// every frame the generated unmarshallers accept gives the Meta they give. A failed read of the underlying
// stream yields an error wrapping that read error. Errors are sticky: once
// Next has returned an error, it returns the same error with an empty Frame.
//
// # Framings
//
// JSON ("application/json", with any parameters, such as those of a
// metadata-only watch, and "application/*+json"): the body is a sequence of
// objects {"type":...,"object":...}, each normally followed by "\n". A Raw is
// the leading whitespace, the object, and whatever whitespace follows it and
// has already been received; the Reader never waits for more bytes once an
// object is complete, so on a live watch a trailing "\n" that arrives late is
// carried by the next frame (or by the Raw returned with io.EOF) instead.
// Fields are matched case-sensitively, as the apiserver and client-go do.
//
// Protobuf ("application/vnd.kubernetes.protobuf;stream=watch"): each frame is
// a 4-byte big-endian length followed by a metav1.WatchEvent message; Raw
// includes the length. The event's object must be a "k8s\x00"-prefixed
// runtime.Unknown whose payload carries ObjectMeta at field 1, as every
// Kubernetes object does; a v1 Status (the object of an ERROR event) carries
// ListMeta there instead and is read as such.
//
// Any other media type, including CBOR watch streams, is not split: the first
// call to Next returns an error wrapping errors.ErrUnsupported and Rest returns
// the untouched stream.
//
// Meta.ResourceVersion of a Status is its ListMeta resourceVersion; Name and
// Namespace are empty for it.
//
// A watch that asks for Table output (Accept
// application/json;as=Table;v=v1;g=meta.k8s.io, as kubectl get -w does) sends
// each event's object as a meta.k8s.io Table of one row. Meta.Kind and
// APIVersion are the Table's, and Namespace, Name, ResourceVersion and
// InitialEventsEnd are read from the metadata of the first row's object (a
// PartialObjectMetadata, or the whole object with includeObject=Object);
// without one (includeObject=None, no rows) Namespace and Name are empty and
// ResourceVersion is the Table's. A meta.k8s.io Table whose rows are not an
// array of objects is malformed; a "rows" field of any other kind is skipped.
// kube-apiserver serves Table only as JSON (it answers 406 to a protobuf
// Table), so protobuf frames are not read this way. Meta.Type is reported as sent: a JSON frame
// without a "type" is still a frame, with Type "". NewReader is meant for the
// body of a successful watch response; an error response is a single Status,
// not a stream of events.
//
// This package reads no environment variables.
package watchframe
