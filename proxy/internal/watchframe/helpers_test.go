package watchframe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

const (
	ctJSON     = "application/json"
	ctMetaJSON = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	ctProtobuf = "application/vnd.kubernetes.protobuf;stream=watch"
)

// testCodecs is a codec factory over client-go's types, metav1's unversioned
// types (Status, WatchEvent) and meta.k8s.io/v1 (PartialObjectMetadata): what
// the apiserver's scope serializers know about for the objects in these tests.
var testCodecs = sync.OnceValue(func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // test setup only
	}
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s)
})

// serializerInfo returns the serializer the apiserver negotiates for a watch
// response of the given media type (parameters ignored).
func serializerInfo(t testing.TB, contentType string) runtime.SerializerInfo {
	t.Helper()
	mt, _, _ := strings.Cut(contentType, ";")
	info, ok := runtime.SerializerInfoForMediaType(testCodecs().SupportedMediaTypes(), mt)
	if !ok || info.StreamSerializer == nil {
		t.Fatalf("no stream serializer for %q", contentType)
	}
	return info
}

// encodeStream encodes events the way the apiserver's watch handler does: the
// object with the negotiated serializer for its group version, wrapped in a
// metav1.WatchEvent encoded with the stream serializer and written through the
// framer. It returns the stream and the bytes of each event in it.
func encodeStream(t testing.TB, contentType string, events []watch.Event) (stream []byte, chunks [][]byte) {
	t.Helper()
	info := serializerInfo(t, contentType)
	var buf bytes.Buffer
	outer := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&buf),
		testCodecs().EncoderForVersion(info.StreamSerializer.Serializer, corev1.SchemeGroupVersion))
	for i, ev := range events {
		var embedded runtime.Encoder
		if _, ok := ev.Object.(*unstructured.Unstructured); ok {
			if !strings.HasPrefix(contentType, ctJSON) {
				t.Fatalf("event %d: unstructured objects are only served as JSON", i)
			}
			embedded = unstructured.UnstructuredJSONScheme
		} else {
			embedded = testCodecs().EncoderForVersion(info.Serializer, groupVersionOf(ev.Object))
		}
		enc := restclientwatch.NewEncoder(outer, embedded)
		start := buf.Len()
		if err := enc.Encode(&ev); err != nil {
			t.Fatalf("event %d: unable to encode %s %T: %v", i, ev.Type, ev.Object, err)
		}
		chunks = append(chunks, bytes.Clone(buf.Bytes()[start:]))
	}
	return buf.Bytes(), chunks
}

func groupVersionOf(obj runtime.Object) schema.GroupVersion {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata:
		return metav1.SchemeGroupVersion
	default:
		return corev1.SchemeGroupVersion
	}
}

// decodeClientGo decodes a watch stream with client-go's own watch decoder,
// as rest.Request.Watch sets it up.
func decodeClientGo(t testing.TB, contentType string, data []byte, embedded runtime.Decoder) ([]watch.Event, error) {
	t.Helper()
	info := serializerInfo(t, contentType)
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(data)))
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), embedded)
	var out []watch.Event
	for {
		typ, obj, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

// result is everything a Reader returned for one stream.
type result struct {
	ok    []Frame // frames returned with a nil error
	last  Frame   // the frame returned together with err
	err   error   // the first non-nil error, io.EOF at a clean end
	rest  []byte  // all of Rest, read after err
	input []byte  // what the frames and rest must add up to
}

// readAll calls Next until it fails, checks that the error is sticky, reads
// Rest, and checks that the frames and Rest reproduce input exactly.
func readAll(t testing.TB, name string, input []byte, r *Reader) result {
	t.Helper()
	res := result{input: input}
	for {
		f, err := r.Next()
		if err != nil {
			res.last, res.err = f, err
			break
		}
		if len(f.Raw) == 0 {
			t.Fatalf("%s: frame %d: Next returned an empty Raw without an error", name, len(res.ok))
		}
		res.ok = append(res.ok, f)
		if len(res.ok) > len(input) {
			t.Fatalf("%s: Next returned more frames (%d) than the input has bytes", name, len(res.ok))
		}
	}
	if f, err := r.Next(); err != res.err || len(f.Raw) != 0 {
		t.Errorf("%s: Next after error %v: want the same error and no bytes, got %v and %d bytes", name, res.err, err, len(f.Raw))
	}
	rest, err := io.ReadAll(r.Rest())
	if err != nil {
		t.Fatalf("%s: unable to read Rest: %v", name, err)
	}
	res.rest = rest
	if got := res.concat(); !bytes.Equal(got, input) {
		t.Fatalf("%s: frames and Rest do not reproduce the input (err %v):\n got %q\nwant %q", name, res.err, got, input)
	}
	return res
}

func (res result) concat() []byte {
	var b []byte
	for _, f := range res.ok {
		b = append(b, f.Raw...)
	}
	b = append(b, res.last.Raw...)
	return append(b, res.rest...)
}

// metas lists the Meta of every frame, for comparisons.
func (res result) metas() []Meta {
	var ms []Meta
	for _, f := range res.ok {
		ms = append(ms, f.Meta)
	}
	return ms
}

// trimmed lists every frame's Raw without surrounding whitespace: where a
// JSON event's trailing newline travels depends on how reads were split.
func (res result) trimmed() []string {
	var ts []string
	for _, f := range res.ok {
		ts = append(ts, string(bytes.TrimSpace(f.Raw)))
	}
	return ts
}

// configMap returns a ConfigMap shaped like a real one: labels, a
// last-applied annotation, managed fields and some data.
func configMap(i, dataBytes int) *corev1.ConfigMap {
	name := fmt.Sprintf("settings-%04d", i)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       "team-a",
			UID:             types.UID(fmt.Sprintf("6f1d1c0e-8a3b-4c55-9d7e-%012d", i)),
			ResourceVersion: fmt.Sprint(1000 + i),
			Generation:      1,
			Labels:          map[string]string{"app.kubernetes.io/name": "settings", "app.kubernetes.io/part-of": "stalefuzz", "tier": "backend"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{},"name":"` + name + `","namespace":"team-a"}}`,
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1",
				FieldsV1:   &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:config.yaml":{},"f:feature-flags":{}},"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}}}`)},
			}},
		},
		Data: map[string]string{
			"config.yaml":   strings.Repeat("key: value\n", dataBytes/11+1),
			"feature-flags": "alpha=true,beta=false",
		},
	}
}

// sampleEvents are one event of each kind the proxy must understand, with
// the Meta the Reader must report for each.
func sampleEvents() ([]watch.Event, []Meta) {
	cm := configMap(1, 200)
	bookmark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: "1200",
		Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
	}}
	plainBookmark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1300"}}
	// Only a BOOKMARK can end the initial events, whatever the object says.
	annotatedDelete := configMap(2, 10)
	annotatedDelete.Annotations[metav1.InitialEventsAnnotationKey] = "true"
	pom := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "settings-0003", Namespace: "team-b", ResourceVersion: "1003",
		Labels: map[string]string{"tier": "frontend"},
	}}
	status := &metav1.Status{
		Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
		Message:  "too old resource version: 5 (1200)",
		ListMeta: metav1.ListMeta{ResourceVersion: "1201"},
	}
	events := []watch.Event{
		{Type: watch.Added, Object: cm},
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Bookmark, Object: plainBookmark},
		{Type: watch.Deleted, Object: annotatedDelete},
		{Type: watch.Modified, Object: pom},
		{Type: watch.Error, Object: status},
	}
	metas := []Meta{
		{Type: "ADDED", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings-0001", ResourceVersion: "1001"},
		{Type: "BOOKMARK", APIVersion: "v1", Kind: "ConfigMap", ResourceVersion: "1200", InitialEventsEnd: true},
		{Type: "BOOKMARK", APIVersion: "v1", Kind: "ConfigMap", ResourceVersion: "1300"},
		{Type: "DELETED", APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings-0002", ResourceVersion: "1002"},
		{Type: "MODIFIED", APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata", Namespace: "team-b", Name: "settings-0003", ResourceVersion: "1003"},
		{Type: "ERROR", APIVersion: "v1", Kind: "Status", ResourceVersion: "1201"},
	}
	return events, metas
}

// crdEvents are events of a custom resource, served as unstructured JSON.
func crdEvents() ([]watch.Event, []Meta) {
	widget := func(name, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1",
			"kind":       "Widget",
			"metadata":   map[string]any{"name": name, "namespace": "team-c", "resourceVersion": rv},
			"spec":       map[string]any{"size": int64(3), "note": "braces } { and \"quotes\" \\ in strings", "tags": []any{"a", "b"}},
		}}
		return u
	}
	events := []watch.Event{
		{Type: watch.Added, Object: widget("w1", "7")},
		{Type: watch.Modified, Object: widget("w1", "8")},
	}
	metas := []Meta{
		{Type: "ADDED", APIVersion: "example.com/v1", Kind: "Widget", Namespace: "team-c", Name: "w1", ResourceVersion: "7"},
		{Type: "MODIFIED", APIVersion: "example.com/v1", Kind: "Widget", Namespace: "team-c", Name: "w1", ResourceVersion: "8"},
	}
	return events, metas
}

// configMapStream is a stream of n MODIFIED events of realistic ConfigMaps.
func configMapStream(t testing.TB, contentType string, n int) []byte {
	t.Helper()
	events := make([]watch.Event, n)
	for i := range events {
		events[i] = watch.Event{Type: watch.Modified, Object: configMap(i, 600)}
	}
	stream, _ := encodeStream(t, contentType, events)
	return stream
}
