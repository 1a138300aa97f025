package watchframe

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// fuzzMaxFrame is the small frame limit the fuzz targets read with. The
// Reader promises no slack: no Frame.Raw is longer than maxFrame.
const fuzzMaxFrame = 1024

func FuzzJSONReader(f *testing.F) {
	crd, _ := crdEvents()
	addSeeds(f, encodeChunks(f, ctJSON, leanEvents()))
	addSeeds(f, encodeChunks(f, ctJSON, crd))
	for _, s := range []string{
		"", " \n", "[]", `{"type":"ADDED","object":"\"}"}`, `{"type":"ADDED"}{`, `{]`, `{"a":"\\"}`, `{"type":"\u0041DDED"}`,
		`{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","rows":[{"object":{"metadata":{"name":"a"}}}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkInvariants(t, ctJSON, data, func(t *testing.T, f Frame) {
			if !json.Valid(f.Raw) || len(bytes.TrimSpace(f.Raw)) == 0 || bytes.TrimSpace(f.Raw)[0] != '{' {
				t.Fatalf("frame %q was returned without error but is not one JSON object", f.Raw)
			}
		})
	})
}

func FuzzProtobufReader(f *testing.F) {
	addSeeds(f, encodeChunks(f, ctProtobuf, leanEvents()))
	for _, s := range []string{"", "\x00\x00", "\x00\x00\x00\x00", "\xff\xff\xff\xff", "\x00\x00\x04\x01{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkInvariants(t, ctProtobuf, data, func(t *testing.T, f Frame) {
			if len(f.Raw) < 4 || int(binary.BigEndian.Uint32(f.Raw)) != len(f.Raw)-4 {
				t.Fatalf("frame %q was returned without error but its length prefix does not match its %d bytes", f.Raw, len(f.Raw))
			}
		})
	})
}

// leanEvents are sampleEvents without the bulk (managed fields, annotations,
// data) that makes real objects long: the fuzzer minimizes every input that
// finds new coverage in time quadratic in its length, so long seeds leave it
// no time to fuzz.
func leanEvents() []watch.Event {
	events, _ := sampleEvents()
	for _, ev := range events {
		if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
			cm.ManagedFields, cm.Labels = nil, nil
			delete(cm.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
			if cm.Data != nil {
				cm.Data = map[string]string{"k": "v"}
			}
		}
	}
	return events
}

func encodeChunks(f *testing.F, ct string, events []watch.Event) [][]byte {
	_, chunks := encodeStream(f, ct, events)
	return chunks
}

// addSeeds adds every event on its own, every two adjacent events together,
// and truncations of those pairs around the boundary and inside each event.
func addSeeds(f *testing.F, chunks [][]byte) {
	for i, c := range chunks {
		f.Add(c)
		if i+1 == len(chunks) {
			break
		}
		pair := append(bytes.Clone(c), chunks[i+1]...)
		f.Add(pair)
		for _, cut := range []int{1, 3, len(c) / 2, len(c) - 1, len(c) + 1, len(c) + 3, len(pair) - 1} {
			f.Add(pair[:cut])
		}
	}
}

// checkInvariants reads data in one piece with a small maxFrame and one byte
// at a time with the default one, and checks that
//   - the frames and Rest reproduce data byte for byte (readAll),
//   - no frame is longer than maxFrame,
//   - every frame returned without error passes validFrame,
//   - both readers agree on every frame the small-limit reader accepted.
func checkInvariants(t *testing.T, ct string, data []byte, validFrame func(*testing.T, Frame)) {
	small := readAll(t, "whole/1024", data, NewReader(bytes.NewReader(data), ct, fuzzMaxFrame))
	for i, f := range append(small.ok, small.last) {
		if len(f.Raw) > fuzzMaxFrame {
			t.Fatalf("frame %d is %d bytes, longer than maxFrame %d", i, len(f.Raw), fuzzMaxFrame)
		}
	}
	for _, f := range small.ok {
		validFrame(t, f)
	}
	oneByte := readAll(t, "onebyte/default", data, NewReader(iotest.OneByteReader(bytes.NewReader(data)), ct, 0))
	n := len(small.ok)
	if len(oneByte.ok) < n {
		t.Fatalf("reading one byte at a time yielded %d frames (then %v), reading in one piece with a smaller limit %d", len(oneByte.ok), oneByte.err, n)
	}
	oneByte.ok = oneByte.ok[:n]
	if !reflect.DeepEqual(oneByte.metas(), small.metas()) || !reflect.DeepEqual(oneByte.trimmed(), small.trimmed()) {
		t.Fatalf("reading one byte at a time and in one piece disagree:\n%+v\n%+v", oneByte.metas(), small.metas())
	}
}
