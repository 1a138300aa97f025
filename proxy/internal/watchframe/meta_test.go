package watchframe

import (
	"bytes"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// generatedMeta reads Meta with the generated unmarshallers, which decode
// every field: what protobufMeta must agree with.
func generatedMeta(payload []byte) (Meta, error) {
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(payload); err != nil {
		return Meta{}, err
	}
	obj, ok := bytes.CutPrefix(ev.Object.Raw, protoMagic)
	if !ok {
		return Meta{}, fmt.Errorf("no %q prefix", protoMagic)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(obj); err != nil {
		return Meta{}, err
	}
	m := Meta{Type: ev.Type, APIVersion: unk.APIVersion, Kind: unk.Kind}
	if unk.APIVersion == "v1" && unk.Kind == "Status" {
		var st metav1.Status
		if err := st.Unmarshal(unk.Raw); err != nil {
			return Meta{}, err
		}
		m.ResourceVersion = st.ResourceVersion
		return m, nil
	}
	var pom metav1.PartialObjectMetadata
	if err := pom.Unmarshal(unk.Raw); err != nil {
		return Meta{}, err
	}
	m.Namespace, m.Name, m.ResourceVersion = pom.Namespace, pom.Name, pom.ResourceVersion
	m.InitialEventsEnd = ev.Type == "BOOKMARK" && pom.Annotations[metav1.InitialEventsAnnotationKey] == "true"
	return m, nil
}

// FuzzProtobufMeta checks protobufMeta against the generated unmarshallers:
// the same Meta for every payload they accept, and never an error for one
// of them (protobufMeta skips what it does not need, so it may read a
// payload they refuse).
func FuzzProtobufMeta(f *testing.F) {
	events, _ := sampleEvents()
	for _, c := range encodeChunks(f, ctProtobuf, events) {
		f.Add(c[4:])
	}
	for _, s := range []string{"", "\x0a\x05ADDED\x12\x02\x0a\x00", "\x0a\x05ADDED\x12\x06\x0a\x04k8s\x00", "\x12\x00\x0a\x01A"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		want, wantErr := generatedMeta(payload)
		got, err := protobufMeta(payload, map[string]string{"ADDED": "ADDED"})
		if wantErr != nil {
			return
		}
		if err != nil {
			t.Fatalf("protobufMeta refuses a payload the generated unmarshallers read as %+v: %v", want, err)
		}
		if got != want {
			t.Fatalf("protobufMeta: %+v\ngenerated: %+v", got, want)
		}
	})
}

// TestProtobufMetaSkipsWhatItDoesNotNeed: a payload whose damage lies
// only in a field Meta does not need (here an ObjectMeta label entry of the
// wrong wire type) is read; the generated unmarshallers refuse it.
func TestProtobufMetaSkipsWhatItDoesNotNeed(t *testing.T) {
	meta := "\x0a\x01a" + "\x1a\x02ns" + "\x32\x017" + "\x58\x01" // name, namespace, resourceVersion, labels (11) as a varint
	obj := "\x0a\x0a\x0a\x02v1\x12\x04Kind" + "\x12" + string(rune(len(meta)+2)) + "\x0a" + string(rune(len(meta))) + meta
	raw := "k8s\x00" + obj
	payload := []byte("\x0a\x08MODIFIED\x12" + string(rune(len(raw)+2)) + "\x0a" + string(rune(len(raw))) + raw)
	if _, err := generatedMeta(payload); err == nil {
		t.Fatal("the generated unmarshallers read the damaged payload: the test no longer damages it")
	}
	got, err := protobufMeta(payload, nil)
	want := Meta{Type: "MODIFIED", APIVersion: "v1", Kind: "Kind", Namespace: "ns", Name: "a", ResourceVersion: "7"}
	if err != nil || got != want {
		t.Fatalf("protobufMeta = %+v, %v; want %+v", got, err, want)
	}
}
