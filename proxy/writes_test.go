package proxy_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

var _ = Describe("writes", func() {
	It("records each write's kind, precondition, what it sets and its call site, through protobuf and JSON", func() {
		ctx := context.Background()
		ns := newNamespace()
		p := &proxy.Proxy{Upstream: cp.Config}
		Expect(p.Start()).To(Succeed())
		DeferCleanup(p.Stop)
		c, err := p.Client("writer")
		Expect(err).NotTo(HaveOccurred())
		cs := kubernetes.NewForConfigOrDie(c.Config()) // protobuf
		cms := cs.CoreV1().ConfigMaps(ns)
		cr, err := client.New(c.Config(), client.Options{Scheme: scheme}) // JSON patches
		Expect(err).NotTo(HaveOccurred())

		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		cm.Data["a"] = "2"
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}) // carries its resourceVersion
		Expect(err).NotTo(HaveOccurred())
		base := cm.DeepCopy()
		cm.Data["b"] = "3"
		Expect(cr.Patch(ctx, cm, client.MergeFrom(base))).To(Succeed()) // blind
		base = cm.DeepCopy()
		cm.Data["a"] = "4"
		Expect(cr.Patch(ctx, cm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
		_, err = cms.Patch(ctx, "cm", types.StrategicMergePatchType, []byte(`{"data":{"c":"5"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cms.Patch(ctx, "cm", types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"`+cm.ResourceVersion+`"},{"op":"remove","path":"/data/c"}]`), metav1.PatchOptions{})
		Expect(err).To(HaveOccurred()) // the strategic merge patch moved it on: the test op fails
		_, err = cms.Apply(ctx, applycorev1.ConfigMap("cm", ns).WithData(map[string]string{"d": "6"}), metav1.ApplyOptions{FieldManager: "me", Force: true})
		Expect(err).NotTo(HaveOccurred())
		_, err = cms.Patch(ctx, "cm", types.MergePatchType, []byte(`{"data":{"e":"7"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).NotTo(HaveOccurred())
		cur, err := cms.Get(ctx, "cm", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cms.Delete(ctx, "cm", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(cur.ResourceVersion)}})).To(Succeed())

		var got []string
		for _, r := range p.Trace().Since(trace.Cursor{}).Requests {
			if r.Resource != "configmaps" || r.Write == nil {
				continue
			}
			Expect(r.Caller).To(HavePrefix("proxy/writes_test.go:"), "call site of %s %s", r.Verb, r.Write.Patch)
			Expect(r.Caller).To(MatchRegexp(`:\d+ init\.func`), "call site of %s %s names the function", r.Verb, r.Write.Patch)
			lock := "blind"
			if r.SentRV != "" {
				lock = "rv"
			}
			if r.DryRun {
				lock += " dry-run"
			}
			got = append(got, strings.TrimSpace(fmt.Sprintf("%s %s %s %d force=%v manager=%s %v", r.Verb, r.Write.Patch, lock, r.Code, r.Write.Force, r.Write.Manager, r.Write.Set)))
		}
		Expect(got).To(Equal([]string{
			`create  blind 201 force=false manager= map[data.a:"1"]`,
			`update  rv 200 force=false manager= map[data.a:"2"]`,
			`patch merge blind 200 force=false manager= map[data.b:"3"]`,
			`patch merge rv 200 force=false manager= map[data.a:"4"]`,
			`patch strategic-merge blind 200 force=false manager= map[data.c:"5"]`,
			`patch json rv 422 force=false manager= map[data.c:null]`,
			`patch apply blind 200 force=true manager=me map[data.d:"6"]`,
			`patch merge blind dry-run 200 force=false manager= map[data.e:"7"]`,
			`delete  rv 200 force=false manager= map[]`,
		}))
	})
})

var _ = Describe("a create", func() {
	It("is traced with the name of the object the apiserver created, a generateName create's too, through protobuf and JSON", func() {
		ctx := context.Background()
		ns := newNamespace()
		c, err := px.Client("generate-name")
		Expect(err).NotTo(HaveOccurred())
		start := px.Trace().Cursor()
		proto := kubernetes.NewForConfigOrDie(c.Config()).CoreV1().ConfigMaps(ns)
		byProto, err := proto.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		cr, err := client.New(c.Config(), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		byJSON := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gen-"}}
		Expect(cr.Create(ctx, byJSON)).To(Succeed())
		var names []string
		for _, r := range requestsOfClient(px, start, "generate-name") {
			if r.Verb == "create" {
				names = append(names, r.Name)
			}
		}
		Expect(names).To(ConsistOf(byProto.Name, byJSON.Name))
	})
})
