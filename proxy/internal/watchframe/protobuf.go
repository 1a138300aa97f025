package watchframe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if r.strs == nil {
		r.strs = map[string]string{}
	}
	meta, err := protobufMeta(raw[4:], r.strs)
	if err != nil {
		return r.malformed("protobuf", raw, "%v", err)
	}
	return Frame{Raw: raw, Meta: meta}, nil
}

// protobufMeta reads Meta from a metav1.WatchEvent message by walking the
// wire format down to the fields it needs, without copying or decoding the
// rest: ObjectMeta's other fields (managed fields above all) were most of
// the proxy's decoding cost. Every frame the generated unmarshallers accept
// gives the same Meta here (FuzzProtobufMeta); a frame whose damage lies
// only in fields it skips is read, and left to the client to refuse.
//
// strs interns the strings a stream repeats (event types, API versions,
// kinds, namespaces): nil interns nothing.
func protobufMeta(payload []byte, strs map[string]string) (Meta, error) {
	var m Meta
	var object []byte
	err := walk(payload, "WatchEvent", func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 1: // type
			if typ != protowire.BytesType {
				return wrongType("WatchEvent.type", typ)
			}
			m.Type = intern(strs, v)
		case 2: // object: a runtime.RawExtension, whose field 1 is Raw
			if typ != protowire.BytesType {
				return wrongType("WatchEvent.object", typ)
			}
			return walk(v, "RawExtension", func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == 1 {
					if typ != protowire.BytesType {
						return wrongType("RawExtension.raw", typ)
					}
					object = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return Meta{}, fmt.Errorf("unable to unmarshal WatchEvent: %w", err)
	}
	obj, ok := bytes.CutPrefix(object, protoMagic)
	if !ok {
		return Meta{}, fmt.Errorf("object of %q event lacks the %q prefix", m.Type, protoMagic)
	}
	var raw []byte
	err = walk(obj, "Unknown", func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 1: // typeMeta
			if typ != protowire.BytesType {
				return wrongType("Unknown.typeMeta", typ)
			}
			return walk(v, "TypeMeta", func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num != 1 && num != 2 {
					return nil
				}
				if typ != protowire.BytesType {
					return wrongType("TypeMeta field "+strconv.Itoa(int(num)), typ)
				}
				if num == 1 {
					m.APIVersion = intern(strs, v)
				} else {
					m.Kind = intern(strs, v)
				}
				return nil
			})
		case 2: // raw
			if typ != protowire.BytesType {
				return wrongType("Unknown.raw", typ)
			}
			raw = v
		}
		return nil
	})
	if err != nil {
		return Meta{}, fmt.Errorf("unable to unmarshal object of %q event: %w", m.Type, err)
	}
	// Field 1 of every object is its ObjectMeta; of a v1 Status, its
	// ListMeta.
	status := m.APIVersion == "v1" && m.Kind == "Status"
	var annotations map[string]string
	err = walk(raw, "object", func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 {
			return nil
		}
		if typ != protowire.BytesType {
			return wrongType("metadata", typ)
		}
		if status {
			return walk(v, "ListMeta", func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num != 2 {
					return nil
				}
				if typ != protowire.BytesType {
					return wrongType("ListMeta.resourceVersion", typ)
				}
				m.ResourceVersion = string(v)
				return nil
			})
		}
		return walk(v, "ObjectMeta", func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case 1, 3, 6, 12: // name, namespace, resourceVersion, annotations
			default:
				return nil
			}
			if typ != protowire.BytesType {
				return wrongType("ObjectMeta field "+strconv.Itoa(int(num)), typ)
			}
			switch num {
			case 1:
				m.Name = string(v)
			case 3:
				m.Namespace = intern(strs, v)
			case 6:
				m.ResourceVersion = string(v)
			case 12:
				if m.Type != "BOOKMARK" {
					return nil
				}
				var key, value []byte
				if err := walk(v, "annotation", func(num protowire.Number, typ protowire.Type, v []byte) error {
					if num != 1 && num != 2 {
						return nil
					}
					if typ != protowire.BytesType {
						return wrongType("annotation field "+strconv.Itoa(int(num)), typ)
					}
					if num == 1 {
						key = v
					} else {
						value = v
					}
					return nil
				}); err != nil {
					return err
				}
				if annotations == nil {
					annotations = map[string]string{}
				}
				annotations[string(key)] = string(value)
			}
			return nil
		})
	})
	if err != nil {
		if status {
			return Meta{}, fmt.Errorf("unable to unmarshal v1 Status of %q event: %w", m.Type, err)
		}
		return Meta{}, fmt.Errorf("unable to unmarshal metadata of %s %s in %q event: %w", m.APIVersion, m.Kind, m.Type, err)
	}
	m.InitialEventsEnd = m.Type == "BOOKMARK" && annotations[metav1.InitialEventsAnnotationKey] == "true"
	return m, nil
}

// walk calls field for each field of the protobuf message msg, in order,
// with its value: the bytes of a length-delimited field, nil for the
// others (whose values it checks and skips).
func walk(msg []byte, name string, field func(protowire.Number, protowire.Type, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%s: %w", name, protowire.ParseError(n))
		}
		msg = msg[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(msg)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("%s field %d: %w", name, num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if err := field(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// maxInterned bounds the strings a Reader interns.
const maxInterned = 64

// intern returns b as a string: the one in strs if it is there (a lookup
// that allocates nothing), else a new one, kept while strs has room.
func intern(strs map[string]string, b []byte) string {
	if s, ok := strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if strs != nil && len(strs) < maxInterned {
		strs[s] = s
	}
	return s
}

func wrongType(field string, typ protowire.Type) error {
	return fmt.Errorf("wrong wire type %d for %s", typ, field)
}
