package watchframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

func TestRealEncodings(t *testing.T) {
	events, metas := sampleEvents()
	for _, ct := range []string{ctJSON, ctMetaJSON, ctProtobuf} {
		stream, chunks := encodeStream(t, ct, events)
		res := readAll(t, ct, stream, NewReader(bytes.NewReader(stream), ct, 0))
		if res.err != io.EOF || len(res.last.Raw) != 0 || len(res.rest) != 0 {
			t.Fatalf("%s: want a clean io.EOF after %d frames, got %d frames, error %v, %d bytes with it and %d in Rest",
				ct, len(events), len(res.ok), res.err, len(res.last.Raw), len(res.rest))
		}
		if got := res.metas(); !reflect.DeepEqual(got, metas) {
			t.Errorf("%s: metas:\n got %+v\nwant %+v", ct, got, metas)
		}
		for i, f := range res.ok {
			if !bytes.Equal(f.Raw, chunks[i]) {
				t.Errorf("%s: frame %d (%s %s): Raw is not the event as encoded:\n got %q\nwant %q", ct, i, f.Meta.Type, f.Meta.Kind, f.Raw, chunks[i])
			}
			// Each frame on its own is one complete event for client-go.
			got, err := decodeClientGo(t, ct, f.Raw, testCodecs().UniversalDeserializer())
			if err != nil || len(got) != 1 {
				t.Fatalf("%s: frame %d: client-go decoded %d events, error %v; want exactly 1", ct, i, len(got), err)
			}
			checkDecoded(t, ct+": frame", i, f.Meta, got[0], events[i])
		}
		// The reassembled stream is what client-go would have read from the apiserver.
		got, err := decodeClientGo(t, ct, res.concat(), testCodecs().UniversalDeserializer())
		if err != nil || len(got) != len(events) {
			t.Fatalf("%s: client-go decoded %d events from the reassembled stream, error %v; want %d", ct, len(got), err, len(events))
		}
		for i := range got {
			checkDecoded(t, ct+": reassembled event", i, metas[i], got[i], events[i])
		}
	}
}

// checkDecoded compares an event client-go decoded with the one encoded, and
// with the Meta the Reader reported for it.
func checkDecoded(t *testing.T, name string, i int, m Meta, got, sent watch.Event) {
	t.Helper()
	gvk := got.Object.GetObjectKind().GroupVersionKind()
	if string(got.Type) != m.Type || gvk.GroupVersion().String() != m.APIVersion || gvk.Kind != m.Kind {
		t.Errorf("%s %d: client-go decoded %s %s, Meta says %s %s %s", name, i, got.Type, gvk, m.Type, m.APIVersion, m.Kind)
	}
	obj := got.Object.DeepCopyObject()
	if _, typed := obj.(*unstructured.Unstructured); !typed {
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // the sent objects carry no TypeMeta
	}
	if got.Type != sent.Type || !apiequality.Semantic.DeepEqual(obj, sent.Object) {
		t.Errorf("%s %d: client-go decoded %s %#v, want %s %#v", name, i, got.Type, obj, sent.Type, sent.Object)
	}
}

func TestCustomResourceJSON(t *testing.T) {
	events, metas := crdEvents()
	stream, chunks := encodeStream(t, ctJSON, events)
	res := readAll(t, "crd", stream, NewReader(bytes.NewReader(stream), ctJSON, 0))
	if res.err != io.EOF {
		t.Fatalf("crd: want io.EOF, got %v", res.err)
	}
	if got := res.metas(); !reflect.DeepEqual(got, metas) {
		t.Errorf("crd: metas:\n got %+v\nwant %+v", got, metas)
	}
	for i, f := range res.ok {
		if !bytes.Equal(f.Raw, chunks[i]) {
			t.Errorf("crd: frame %d: got Raw %q, want %q", i, f.Raw, chunks[i])
		}
	}
	got, err := decodeClientGo(t, ctJSON, res.concat(), unstructured.UnstructuredJSONScheme)
	if err != nil || len(got) != len(events) {
		t.Fatalf("crd: client-go decoded %d events, error %v; want %d", len(got), err, len(events))
	}
	for i := range got {
		checkDecoded(t, "crd: event", i, metas[i], got[i], events[i])
	}
}

// TestSplitReads feeds streams through readers that return few bytes at a
// time, so frames and even length prefixes straddle reads and the read buffer.
func TestSplitReads(t *testing.T) {
	big := configMap(99, 3*bufSize) // one event larger than the read buffer
	events, _ := sampleEvents()
	events = append(events, watch.Event{Type: watch.Modified, Object: big})
	crd, _ := crdEvents()
	for _, tc := range []struct {
		ct     string
		events []watch.Event
	}{
		{ctJSON, events}, {ctProtobuf, events}, {ctJSON, crd},
	} {
		sample, _ := encodeStream(t, tc.ct, tc.events)
		for _, stream := range [][]byte{sample, configMapStream(t, tc.ct, 60)} {
			want := readAll(t, tc.ct+"/whole", stream, NewReader(bytes.NewReader(stream), tc.ct, 0))
			if want.err != io.EOF {
				t.Fatalf("%s: want io.EOF, got %v", tc.ct, want.err)
			}
			for name, r := range map[string]io.Reader{
				"OneByteReader": iotest.OneByteReader(bytes.NewReader(stream)),
				"HalfReader":    iotest.HalfReader(bytes.NewReader(stream)),
				"DataErrReader": iotest.DataErrReader(bytes.NewReader(stream)),
			} {
				name = tc.ct + "/" + name
				got := readAll(t, name, stream, NewReader(r, tc.ct, 0))
				if got.err != io.EOF {
					t.Errorf("%s: want io.EOF, got %v", name, got.err)
				}
				if !reflect.DeepEqual(got.metas(), want.metas()) {
					t.Errorf("%s: metas:\n got %+v\nwant %+v", name, got.metas(), want.metas())
				}
				if !reflect.DeepEqual(got.trimmed(), want.trimmed()) {
					t.Errorf("%s: frames differ from those read in one piece", name)
				}
			}
		}
	}
}

func TestNewReaderMediaTypes(t *testing.T) {
	const body = `{"type":"ADDED","object":{"kind":"ConfigMap"}}` + "\n"
	for _, tc := range []struct {
		ct        string
		supported bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{ctMetaJSON, true},
		{"application/json;stream=watch", true},
		{"application/apply-patch+json", true},
		{"Application/JSON", true},
		{ctProtobuf, true},
		{"application/vnd.kubernetes.protobuf", false}, // not a watch stream
		{"application/vnd.kubernetes.protobuf;stream=list", false},
		{"application/cbor-seq", false},
		{"application/yaml", false},
		{"text/plain", false},
		{"", false},
		{"application/json;;", false},
	} {
		r := NewReader(strings.NewReader(body), tc.ct, 0)
		f, err := r.Next()
		if !tc.supported {
			if !errors.Is(err, errors.ErrUnsupported) || len(f.Raw) != 0 {
				t.Errorf("%q: want an error wrapping errors.ErrUnsupported and no bytes, got %v and %q", tc.ct, err, f.Raw)
			}
			if rest, _ := io.ReadAll(r.Rest()); string(rest) != body {
				t.Errorf("%q: Rest: got %q, want the untouched body %q", tc.ct, rest, body)
			}
			continue
		}
		if errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%q: want a supported media type, got %v", tc.ct, err)
		}
	}
}

// want is the outcome of reading one hand-written stream.
type want struct {
	metas      []Meta
	malformed  bool   // err wraps ErrMalformed; otherwise err is io.EOF
	unexpected bool   // err also wraps io.ErrUnexpectedEOF
	last, rest string // Raw returned with err, and Rest
}

func checkWant(t *testing.T, name, ct string, input []byte, maxFrame int, w want) result {
	t.Helper()
	res := readAll(t, name, input, NewReader(bytes.NewReader(input), ct, maxFrame))
	switch {
	case w.malformed && !errors.Is(res.err, ErrMalformed):
		t.Errorf("%s: want an error wrapping ErrMalformed, got %v", name, res.err)
	case !w.malformed && res.err != io.EOF:
		t.Errorf("%s: want io.EOF, got %v", name, res.err)
	case errors.Is(res.err, io.ErrUnexpectedEOF) != w.unexpected:
		t.Errorf("%s: error %v: want wrapping io.ErrUnexpectedEOF %v", name, res.err, w.unexpected)
	}
	if got := res.metas(); !reflect.DeepEqual(got, w.metas) {
		t.Errorf("%s: metas:\n got %+v\nwant %+v", name, got, w.metas)
	}
	if string(res.last.Raw) != w.last || string(res.rest) != w.rest {
		t.Errorf("%s: got Raw %q with the error and Rest %q, want %q and %q", name, res.last.Raw, res.rest, w.last, w.rest)
	}
	return res
}

func TestJSONEdgeCases(t *testing.T) {
	added := Meta{Type: "ADDED"}
	for _, tc := range []struct {
		name, in string
		want
	}{
		{name: "empty", in: ""},
		{name: "only whitespace", in: " \r\n\t", want: want{last: " \r\n\t"}},
		{name: "no newlines", in: `{"type":"ADDED","object":{}}{"type":"ADDED"}`, want: want{metas: []Meta{added, added}}},
		{name: "trailing whitespace", in: `{"type":"ADDED"}` + "\n\n  ", want: want{metas: []Meta{added}}},
		{name: "braces and escapes in strings", in: `{"type":"ADDED","object":{"metadata":{"name":"a}{\"b\\","namespace":"]["}}}` + "\n",
			want: want{metas: []Meta{{Type: "ADDED", Name: `a}{"b\`, Namespace: "]["}}}},
		{name: "fields are case-sensitive", in: `{"Type":"ADDED","object":{"Kind":"ConfigMap","kind":"Pod"}}`,
			want: want{metas: []Meta{{Kind: "Pod"}}}},
		{name: "annotation outside BOOKMARK", in: `{"type":"ADDED","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			want: want{metas: []Meta{added}}},
		{name: "annotation not true", in: `{"type":"BOOKMARK","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"false"}}}}`,
			want: want{metas: []Meta{{Type: "BOOKMARK"}}}},
		{name: "not an object", in: `{"type":"ADDED"}` + "\n" + ` [1]`,
			want: want{metas: []Meta{added}, malformed: true, rest: "[1]"}},
		{name: "not an object after whitespace", in: " \n[1]", want: want{malformed: true, last: " \n", rest: "[1]"}},
		{name: "truncated", in: `{"type":"ADDED"}{"type":"MOD`,
			want: want{metas: []Meta{added}, malformed: true, unexpected: true, last: `{"type":"MOD`}},
		{name: "truncated in string", in: `{"type":"\"`, want: want{malformed: true, unexpected: true, last: `{"type":"\"`}},
		{name: "mismatched brackets", in: `{]{"type":"ADDED"}`, want: want{malformed: true, last: `{]`, rest: `{"type":"ADDED"}`}},
		{name: "wrong field type", in: `{"type":1}` + "\n" + `{}`, want: want{malformed: true, last: `{"type":1}` + "\n", rest: `{}`}},
		{name: "object is a string", in: `{"type":"ADDED","object":"x"}`, want: want{malformed: true, last: `{"type":"ADDED","object":"x"}`}},
		{name: "invalid literal", in: `{"type":nope}`, want: want{malformed: true, last: `{"type":nope}`}},
	} {
		checkWant(t, tc.name, ctJSON, []byte(tc.in), 0, tc.want)
	}
}

func TestProtobufEdgeCases(t *testing.T) {
	events, metas := sampleEvents()
	_, chunks := encodeStream(t, ctProtobuf, events[:1])
	ev := string(chunks[0])
	frame := func(payload string) string {
		return string(binary.BigEndian.AppendUint32(nil, uint32(len(payload)))) + payload
	}
	for _, tc := range []struct {
		name, in string
		want
	}{
		{name: "empty", in: ""},
		{name: "truncated length", in: ev + "\x00\x00", want: want{metas: metas[:1], malformed: true, unexpected: true, last: "\x00\x00"}},
		{name: "truncated payload", in: ev + ev[:10], want: want{metas: metas[:1], malformed: true, unexpected: true, last: ev[:10]}},
		{name: "empty payload", in: frame("") + ev, want: want{malformed: true, last: frame(""), rest: ev}},
		{name: "object without magic", in: frame("\x0a\x05ADDED\x12\x02\x0a\x00") + ev,
			want: want{malformed: true, last: frame("\x0a\x05ADDED\x12\x02\x0a\x00"), rest: ev}},
		{name: "not protobuf", in: frame("\xff\xff\xff") + ev, want: want{malformed: true, last: frame("\xff\xff\xff"), rest: ev}},
		{name: "json sent as protobuf", in: `{"type":"ADDED"}`, want: want{malformed: true, last: `{"ty`, rest: `pe":"ADDED"}`}},
	} {
		checkWant(t, tc.name, ctProtobuf, []byte(tc.in), 0, tc.want)
	}
}

func TestMaxFrame(t *testing.T) {
	small := configMap(1, 10)
	large := configMap(2, 4000)
	events := []watch.Event{{Type: watch.Added, Object: small}, {Type: watch.Added, Object: large}, {Type: watch.Added, Object: small}}
	for _, ct := range []string{ctJSON, ctProtobuf} {
		stream, chunks := encodeStream(t, ct, events)
		limit := len(chunks[0]) + 100
		res := readAll(t, ct, stream, NewReader(bytes.NewReader(stream), ct, limit))
		if len(res.ok) != 1 || !errors.Is(res.err, ErrMalformed) {
			t.Fatalf("%s: maxFrame %d: want 1 frame then ErrMalformed for a %d-byte event, got %d frames and %v", ct, limit, len(chunks[1]), len(res.ok), res.err)
		}
		wantLast := limit // JSON consumes up to the limit
		if ct == ctProtobuf {
			wantLast = 4 // only the length prefix
		}
		if len(res.last.Raw) != wantLast {
			t.Errorf("%s: maxFrame %d: got %d bytes with the error, want %d", ct, limit, len(res.last.Raw), wantLast)
		}
		// A frame exactly maxFrame long is accepted.
		exact := readAll(t, ct, stream, NewReader(bytes.NewReader(stream), ct, len(chunks[1])))
		if len(exact.ok) != 3 || exact.err != io.EOF {
			t.Errorf("%s: maxFrame %d: want 3 frames then io.EOF, got %d frames and %v", ct, len(chunks[1]), len(exact.ok), exact.err)
		}
	}
}

func TestMaxFrameRaisedToFour(t *testing.T) {
	for _, ct := range []string{ctJSON, ctProtobuf} {
		in := []byte(`{"type":"ADDED"}`)
		res := readAll(t, ct, in, NewReader(bytes.NewReader(in), ct, 1))
		if !errors.Is(res.err, ErrMalformed) || len(res.last.Raw) != 4 {
			t.Errorf("%s: maxFrame 1: want ErrMalformed with 4 bytes, got %v with %q", ct, res.err, res.last.Raw)
		}
	}
}

// TestHostileLength checks that a length prefix costs only the bytes that
// actually follow it: one above the limit is rejected without reading on, and
// one below it that is never honoured does not allocate what it claims.
func TestHostileLength(t *testing.T) {
	for _, tc := range []struct {
		name       string
		length     uint32
		wantRaw    int
		unexpected bool
	}{
		{"above the limit", 0xfffffff0, 4, false},
		{"below the limit, truncated", defaultMaxFrame - 4, 104, true},
	} {
		in := binary.BigEndian.AppendUint32(nil, tc.length)
		in = append(in, make([]byte, 100)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := NewReader(bytes.NewReader(in), ctProtobuf, 0)
		f, err := r.Next()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) || errors.Is(err, io.ErrUnexpectedEOF) != tc.unexpected || len(f.Raw) != tc.wantRaw {
			t.Errorf("%s: length prefix %d: want ErrMalformed (unexpected EOF %v) with %d bytes, got %v with %d bytes",
				tc.name, tc.length, tc.unexpected, tc.wantRaw, err, len(f.Raw))
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 3*bufSize {
			t.Errorf("%s: length prefix %d followed by 100 bytes allocated %d bytes, want at most %d", tc.name, tc.length, got, 3*bufSize)
		}
	}
}

// flakyReader fails once, after its first part, then carries on.
type flakyReader struct {
	parts [][]byte
	err   error
}

func (r *flakyReader) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	if len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
		if err := r.err; err != nil {
			r.err = nil
			return 0, err
		}
		return r.Read(p)
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

func TestReadErrorPassesThrough(t *testing.T) {
	errReset := errors.New("connection reset")
	for _, ct := range []string{ctJSON, ctProtobuf} {
		stream := configMapStream(t, ct, 3)
		cut := len(stream) / 2
		r := NewReader(&flakyReader{parts: [][]byte{bytes.Clone(stream[:cut]), bytes.Clone(stream[cut:])}, err: errReset}, ct, 0)
		res := readAll(t, ct, stream, r)
		if !errors.Is(res.err, errReset) || errors.Is(res.err, ErrMalformed) {
			t.Errorf("%s: want the read error, not ErrMalformed, got %v", ct, res.err)
		}
		if len(res.ok) != 1 {
			t.Errorf("%s: want 1 frame before the failed read, got %d", ct, len(res.ok))
		}
	}
}

func benchmarkReader(b *testing.B, ct string) {
	stream := configMapStream(b, ct, 1000)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream), ct, 0)
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 1000 {
			b.Fatalf("got %d frames, want 1000", n)
		}
	}
}

func BenchmarkReaderJSON(b *testing.B)     { benchmarkReader(b, ctJSON) }
func BenchmarkReaderProtobuf(b *testing.B) { benchmarkReader(b, ctProtobuf) }

// TestTableJSON reads the events of a watch that asks for Table output
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io, kubectl's get -w),
// as kube-apiserver v1.37 sends them (descriptions shortened): each object is
// a Table of one row, and the event is about that row's object.
func TestTableJSON(t *testing.T) {
	const (
		columns = `"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"Name must be unique within a namespace.","priority":0},{"name":"Data","type":"string","format":"","description":"Data contains the configuration data.","priority":0}]`
		pomRow  = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"cm-a","namespace":"team-a","uid":"901c294e-c9e7-4d22-86f1-a31bfe99ce7f","resourceVersion":"222","creationTimestamp":"2026-11-21T21:13:22Z"}}`
	)
	in := `{"type":"BOOKMARK","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"221"},` + columns + `,"rows":[{"cells":["",0,"\u003cunknown\u003e"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"221","annotations":{"k8s.io/initial-events-end":"true"}}}}]}}` + "\n" +
		`{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"222"},"columnDefinitions":null,"rows":[{"cells":["cm-a",1,"0s"],"object":` + pomRow + `}]}}` + "\n" +
		// includeObject=Object: the row carries the whole object.
		`{"type":"MODIFIED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"230"},"columnDefinitions":null,"rows":[{"cells":["cm-b",1,"5s"],"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-b","namespace":"team-b","resourceVersion":"230"},"data":{"rows":"x"}}}]}}` + "\n" +
		// includeObject=None: no object, only the Table's resourceVersion.
		`{"type":"DELETED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"231"},"columnDefinitions":null,"rows":[{"cells":["cm-b",1,"6s"],"object":null}]}}` + "\n" +
		// Another kind's "rows" is not a Table's, whatever its shape.
		`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"name":"w","namespace":"team-c","resourceVersion":"232"},"rows":"any"}}` + "\n" +
		`{"type":"ADDED","object":{"kind":"Table","apiVersion":"example.com/v1","metadata":{"name":"t","namespace":"team-c","resourceVersion":"233"},"rows":[{"object":{"metadata":{"name":"not-this"}}}]}}` + "\n" +
		`{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"234"},"rows":[]}}` + "\n"
	table := func(typ, ns, name, rv string) Meta {
		return Meta{Type: typ, APIVersion: "meta.k8s.io/v1", Kind: "Table", Namespace: ns, Name: name, ResourceVersion: rv}
	}
	bookmark := table("BOOKMARK", "", "", "221")
	bookmark.InitialEventsEnd = true
	checkWant(t, "table", ctJSON, []byte(in), 0, want{metas: []Meta{
		bookmark,
		table("ADDED", "team-a", "cm-a", "222"),
		table("MODIFIED", "team-b", "cm-b", "230"),
		table("DELETED", "", "", "231"),
		{Type: "ADDED", APIVersion: "example.com/v1", Kind: "Widget", Namespace: "team-c", Name: "w", ResourceVersion: "232"},
		{Type: "ADDED", APIVersion: "example.com/v1", Kind: "Table", Namespace: "team-c", Name: "t", ResourceVersion: "233"},
		table("ADDED", "", "", "234"),
	}})

	bad := `{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","rows":"x"}}`
	checkWant(t, "table with malformed rows", ctJSON, []byte(bad), 0, want{malformed: true, last: bad})
}
