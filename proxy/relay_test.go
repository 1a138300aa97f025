package proxy_test

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// TestRelayError: when the upstream connection fails while a client waits
// for a write's answer (the apiserver may have applied it), the proxy
// answers 502 itself and the trace says why, so that no oracle judges an
// execution whose controllers met a failure no apiserver gave.
func TestRelayError(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			panic(http.ErrAbortHandler) // the connection drops before the answer
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}`)
	}))
	defer up.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	p := &proxy.Proxy{Upstream: &rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}()
	c, err := p.Client("c")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(c.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("get through the proxy: %v", err)
	}
	_, err = cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if s, ok := err.(apierrors.APIStatus); !ok || s.Status().Code != http.StatusBadGateway {
		t.Fatalf("create: %v, want the proxy's 502", err)
	}
	var get, create *trace.Request
	tr := p.Trace().Since(trace.Cursor{})
	for i, r := range tr.Requests {
		switch r.Verb {
		case "get":
			get = &tr.Requests[i]
		case "create":
			create = &tr.Requests[i]
		}
	}
	if get == nil || create == nil {
		t.Fatalf("trace %+v lacks the get or the create", tr.Requests)
	}
	if get.Code != http.StatusOK || get.RelayError != "" {
		t.Errorf("get: code %d, relay error %q; want 200 and none", get.Code, get.RelayError)
	}
	if create.Code != http.StatusBadGateway || create.RelayError == "" {
		t.Errorf("create: code %d, relay error %q; want 502 and why", create.Code, create.RelayError)
	}
}
