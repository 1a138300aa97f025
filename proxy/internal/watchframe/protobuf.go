package watchframe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protoMagic prefixes every protobuf-encoded Kubernetes object, including the
// object embedded in a watch event (but not the event itself).
var protoMagic = []byte("k8s\x00")

func (r *Reader) nextProtobuf() (Frame, error) {
	hdr, err := r.br.Peek(4)
	if err != nil {
		if err == io.EOF && len(hdr) == 0 {
			return Frame{}, io.EOF
		}
		raw := bytes.Clone(hdr)
		_, _ = r.br.Discard(len(raw))
		return r.readFailed("protobuf", raw, err)
	}
	n := binary.BigEndian.Uint32(hdr)
	if uint64(n) > uint64(r.max-4) {
		// Consume only the length so that nothing is allocated for the claimed payload.
		raw := bytes.Clone(hdr)
		_, _ = r.br.Discard(4)
		return r.malformed("protobuf", raw, "length prefix %d exceeds the limit of %d bytes", n, r.max-4)
	}
	// Grow raw as the payload arrives rather than trusting the prefix, so that
	// a stream claiming a large frame costs only what it actually sends.
	size := 4 + int(n)
	raw := append(make([]byte, 0, min(size, 4+bufSize)), hdr...)
	_, _ = r.br.Discard(4)
	for len(raw) < size {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return r.readFailed("protobuf", raw, err)
			}
		}
		chunk, _ := r.br.Peek(min(r.br.Buffered(), size-len(raw))) // all buffered: cannot fail
		raw = appendCapped(raw, chunk, size)
		_, _ = r.br.Discard(len(chunk))
	}
	meta, err := protobufMeta(raw[4:])
	if err != nil {
		return r.malformed("protobuf", raw, "%v", err)
	}
	return Frame{Raw: raw, Meta: meta}, nil
}

// protobufMeta reads Meta from a metav1.WatchEvent message using the generated
// unmarshallers, which skip fields they do not know.
func protobufMeta(payload []byte) (Meta, error) {
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(payload); err != nil {
		return Meta{}, fmt.Errorf("unable to unmarshal WatchEvent: %w", err)
	}
	obj, ok := bytes.CutPrefix(ev.Object.Raw, protoMagic)
	if !ok {
		return Meta{}, fmt.Errorf("object of %q event lacks the %q prefix", ev.Type, protoMagic)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(obj); err != nil {
		return Meta{}, fmt.Errorf("unable to unmarshal object of %q event: %w", ev.Type, err)
	}
	m := Meta{Type: ev.Type, APIVersion: unk.APIVersion, Kind: unk.Kind}
	if unk.APIVersion == "v1" && unk.Kind == "Status" { // ListMeta at field 1
		var st metav1.Status
		if err := st.Unmarshal(unk.Raw); err != nil {
			return Meta{}, fmt.Errorf("unable to unmarshal v1 Status of %q event: %w", ev.Type, err)
		}
		m.ResourceVersion = st.ResourceVersion
		return m, nil
	}
	var pom metav1.PartialObjectMetadata
	if err := pom.Unmarshal(unk.Raw); err != nil {
		return Meta{}, fmt.Errorf("unable to unmarshal metadata of %s %s in %q event: %w", unk.APIVersion, unk.Kind, ev.Type, err)
	}
	m.Namespace, m.Name, m.ResourceVersion = pom.Namespace, pom.Name, pom.ResourceVersion
	m.InitialEventsEnd = ev.Type == "BOOKMARK" && pom.Annotations[metav1.InitialEventsAnnotationKey] == "true"
	return m, nil
}
