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
		switch r.Method {
		case http.MethodPost:
			panic(http.ErrAbortHandler) // the connection drops before the answer
		case http.MethodPut:
			_, _ = io.Copy(io.Discard, r.Body) // read whole: a closed connection then ends the context
			<-r.Context().Done()               // no answer until the client gives up
			return
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
	if create.Code != http.StatusBadGateway || create.RelayError == "" || create.Abandoned {
		t.Errorf("create: code %d, relay error %q, abandoned %v; want 502 and why, not abandoned", create.Code, create.RelayError, create.Abandoned)
	}

	// A client that gives up on its own write (a controller cancelling its
	// call) abandoned it: no relay error, which would make the execution a
	// harness error.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	_, err = cs.CoreV1().ConfigMaps("ns").Update(short, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "5"}}, metav1.UpdateOptions{})
	if err == nil {
		t.Fatal("update with a cancelled context succeeded")
	}
	var update *trace.Request
	for deadline := time.Now().Add(5 * time.Second); update == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tr = p.Trace().Since(trace.Cursor{})
		for i, r := range tr.Requests {
			if r.Verb == "update" {
				update = &tr.Requests[i]
			}
		}
	}
	if update == nil || !update.Abandoned || update.RelayError != "" {
		t.Errorf("update given up by its client: %+v, want abandoned with no relay error", update)
	}
}
