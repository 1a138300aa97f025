// Command controller is cert-manager's controller (github.com/cert-manager/cert-manager
// v1.21.2) for stalefuzz: the published module's public controller packages,
// linked the way its own main (cmd/controller/app, a module of its own that
// the Go module proxy does not serve) links them. It builds one
// controller.ContextFactory, constructs the controllers --controllers names
// from controller.Known() (each package registers itself in an init), starts
// the shared informer factories, and runs each controller with
// --concurrent-workers workers until SIGTERM. No leader election, no
// metrics or health server, no ACME, no webhook.
//
// Flags: --kubeconfig, --namespace (empty: all namespaces), --controllers (a
// comma-separated list, required), --feature-gates (cert-manager's, e.g.
// ServerSideApply=true,StableCertificateRequestName=false),
// --concurrent-workers (default 5, cert-manager's default),
// --kube-api-qps and --kube-api-burst (defaults 20 and 50, cert-manager's),
// --cluster-resource-namespace (default kube-system), --v (klog verbosity).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"

	// The controllers a SelfSigned or CA issuer needs; each registers itself
	// with controller.Register in an init, as cmd/controller/app's imports do.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager controller:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig  = flag.String("kubeconfig", "", "path to a kubeconfig")
		namespace   = flag.String("namespace", "", "namespace to operate in (empty: all)")
		controllers = flag.String("controllers", "", "comma-separated controller names")
		gates       = flag.String("feature-gates", "", "cert-manager feature gates, key=value,...")
		workers     = flag.Int("concurrent-workers", 5, "workers per controller")
		qps         = flag.Float64("kube-api-qps", 20, "client QPS (unused when the apiserver has API Priority and Fairness)")
		burst       = flag.Int("kube-api-burst", 50, "client burst")
		crNamespace = flag.String("cluster-resource-namespace", "kube-system", "namespace of ClusterIssuers' Secrets")
	)
	klog.InitFlags(nil)
	flag.Parse()
	logf.InitLogs()

	if *gates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(*gates); err != nil {
			return fmt.Errorf("--feature-gates=%q: %w", *gates, err)
		}
	}
	names := strings.Split(*controllers, ",")
	if *controllers == "" {
		return fmt.Errorf("--controllers is required")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "cert-manager")
	log := logf.FromContext(ctx)

	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         *kubeconfig,
		KubernetesAPIQPS:   float32(*qps),
		KubernetesAPIBurst: *burst,
		Namespace:          *namespace,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: *crNamespace},
		CertificateOptions: controller.CertificateOptions{
			// cert-manager's defaults (internal/apis/config/controller/v1alpha1/defaults.go).
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
		},
	})
	if err != nil {
		return fmt.Errorf("unable to build the controller context: %w", err)
	}

	var run []controller.Interface
	for _, n := range names {
		fn, ok := controller.Known()[n]
		if !ok {
			return fmt.Errorf("--controllers: unknown controller %q", n)
		}
		c, err := fn(factory)
		if err != nil {
			return fmt.Errorf("unable to construct controller %q: %w", n, err)
		}
		run = append(run, c)
	}

	// The informer factories every Context shares: started after the
	// controllers asked for their informers, as cmd/controller/app does.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())

	var wg sync.WaitGroup
	errs := make(chan error, len(run))
	for i, c := range run {
		wg.Go(func() {
			log.Info("starting controller", "controller", names[i])
			if err := c.Run(*workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %q: %w", names[i], err)
				stop()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	log.Info("control loops exited")
	return nil
}
