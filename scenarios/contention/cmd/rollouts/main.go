// Command rollouts runs the contention scenario's controller
// (package contention: a Rollout's plan built once, then advanced step by
// step) as a process with a kubeconfig, as target.yaml declares it: the
// same Reconciler the Go scenario runs in-process.
//
//	rollouts [--write blind|optimistic|blind-ryw]
//
// It reads its kubeconfig from $KUBECONFIG and watches only
// $WATCH_NAMESPACE; no leader election, metrics or health endpoints.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stalefuzz/stalefuzz/scenarios/contention"
)

func main() {
	write := flag.String("write", "blind", "how status is written: blind (a plain merge patch), optimistic (with the resourceVersion), blind-ryw (blind, with read-your-writes consistency)")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), *write); err != nil {
		fmt.Fprintln(os.Stderr, "rollouts:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, write string) error {
	var w contention.Write
	switch write {
	case "blind":
		w = contention.Blind
	case "optimistic":
		w = contention.Optimistic
	case "blind-ryw":
		w = contention.BlindReadYourWrites
	default:
		return fmt.Errorf("--write %q: want blind, optimistic or blind-ryw", write)
	}
	ns := os.Getenv("WATCH_NAMESPACE")
	if ns == "" {
		return fmt.Errorf("WATCH_NAMESPACE is not set")
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("unable to read the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := contention.AddToScheme(scheme); err != nil {
		return err
	}
	opts := manager.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if w == contention.BlindReadYourWrites {
		opts.Client.Cache = &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("unable to create the manager: %w", err)
	}
	r := &contention.Reconciler{Client: mgr.GetClient(), Write: w}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
