package proxy_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stalefuzz/stalefuzz/proxy"
	"github.com/stalefuzz/stalefuzz/proxy/controlplane"
	"github.com/stalefuzz/stalefuzz/proxy/trace"
)

// A controller's cache behind a held watch goes stale, and its write meets a
// genuine 409 Conflict from the real apiserver.
func Example_staleWrite() {
	ctx := context.Background()
	cp := &controlplane.Environment{}
	if err := cp.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer cp.Stop()
	px := &proxy.Proxy{Upstream: cp.Config}
	if err := px.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer px.Stop()

	// The controller under test talks to the apiserver through its own proxy client.
	ctrl, _ := px.Client("my-controller")
	informers, _ := cache.New(ctrl.Config(), cache.Options{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go informers.Start(cctx)
	cached, _ := client.New(ctrl.Config(), client.Options{Cache: &client.CacheOptions{Reader: informers}})
	direct, _ := client.New(cp.Config, client.Options{})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"}, Data: map[string]string{"v": "original"}}
	_ = direct.Create(ctx, cm)
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return cached.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) == nil, nil
	})

	// Hold every ConfigMap event for the controller for 30s, then write behind its back.
	_ = px.SetRules(time.Now(), proxy.Rule{Client: "my-controller", Resource: "configmaps", Action: proxy.Hold, To: 30 * time.Second})
	cm.Data["v"] = "fresh"
	_ = direct.Update(ctx, cm)

	stale := &corev1.ConfigMap{}
	_ = cached.Get(ctx, client.ObjectKeyFromObject(cm), stale)
	fmt.Printf("the controller's cache says %q; the apiserver has %q\n", stale.Data["v"], cm.Data["v"])
	stale.Data["v"] = "from a stale read"
	err := cached.Update(ctx, stale)
	fmt.Println("update from the stale cache: conflict =", apierrors.IsConflict(err))
	for _, r := range px.Trace().Since(trace.Cursor{}).Requests {
		if r.Verb == "update" {
			fmt.Printf("trace: %s %s update with resourceVersion %s -> %d\n", r.Client, r.Resource, "<stale>", r.Code)
		}
	}
	// Output:
	// the controller's cache says "original"; the apiserver has "fresh"
	// update from the stale cache: conflict = true
	// trace: my-controller configmaps update with resourceVersion <stale> -> 409
}
