package target

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadCRDsHelmLabels: a CRD file from a Helm chart's sources (labels
// Helm fills in at install time, as cert-manager's deploy/crds were up to
// v1.15) is read without those labels, keeping the others and the schema;
// a file with Helm template lines is an error naming the file and the fix.
func TestReadCRDsHelmLabels(t *testing.T) {
	dir := t.TempDir()
	chart := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
  labels:
    app: '{{ template "cert-manager.name" . }}'
    app.kubernetes.io/instance: '{{ .Release.Name }}'
    kept: "yes"
    # Generated labels {{- include "labels" . | nindent 4 }}
  annotations:
    '{{ .Values.key }}': x
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
`
	if err := os.WriteFile(filepath.Join(dir, "crd.yaml"), []byte(chart), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := &Target{Name: "t", Dir: dir, CRDs: []string{"crd.yaml"}}
	crds, err := tg.readCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 || crds[0].Name != "widgets.example.com" || crds[0].Spec.Names.Kind != "Widget" {
		t.Fatalf("read %d CRDs (%v), want widgets.example.com", len(crds), crds)
	}
	if got := crds[0].Labels; len(got) != 1 || got["kept"] != "yes" {
		t.Errorf("labels %v: want only kept=yes (the template labels left out)", got)
	}
	if got := crds[0].Annotations; len(got) != 0 {
		t.Errorf("annotations %v: want none", got)
	}

	bad := "{{- if .Values.installCRDs }}\n" + chart + "{{- end }}\n"
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	tg.CRDs = []string{"bad.yaml"}
	if _, err := tg.readCRDs(); err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "helm template") {
		t.Errorf("a file with template lines: got %v, want an error naming bad.yaml and helm template", err)
	}
}
