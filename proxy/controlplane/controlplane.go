package controlplane

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stalefuzz/stalefuzz/proxy/reaper"
)

// KubernetesVersion is the kube-apiserver version hack/assets.sh builds; it
// names the default asset directory.
const KubernetesVersion = "v1.37.1"

// ErrAssetsMissing is returned (wrapped) by Start when kube-apiserver or etcd
// is not where the environment looks for it.
var ErrAssetsMissing = errors.New("control plane binaries not found")

// Environment is one kube-apiserver and etcd. The zero value is usable: it finds
// the binaries in KUBEBUILDER_ASSETS or the setup-envtest store, installs no
// CRDs and discards the control plane's output.
type Environment struct {
	// AssetsDir holds kube-apiserver and etcd. Zero: KUBEBUILDER_ASSETS, else
	// DefaultAssetsDir().
	AssetsDir string

	// CRDs are installed, and waited for, before Start returns. Zero: none.
	CRDs envtest.CRDInstallOptions

	// Output receives the control plane's stdout and stderr. Zero: discarded.
	Output io.Writer

	// FeatureGates are kube-apiserver's --feature-gates, by name: an
	// apiserver as an older release ships it ({"WatchList": false}: 1.31's
	// and 1.33's default, where a client-go informer's initial list is a
	// LIST at resourceVersion 0, served from the watch cache, instead of a
	// watch with its initial events). Zero: the release's defaults. A gate
	// the binary does not know, or one locked at its default, makes Start
	// fail (1.37 has no ConsistentListFromCache gate: consistent lists from
	// the cache are GA).
	FeatureGates map[string]bool

	// Config is an admin config for the apiserver, set by Start.
	Config *rest.Config

	env     *envtest.Environment
	apiDown bool // StopAPIServer stopped kube-apiserver
	workDir string
	reaper  *reaper.Reaper
	stopped sync.Once
	stopErr error
}

// DefaultAssetsDir is where hack/assets.sh puts the binaries when
// KUBEBUILDER_ASSETS is unset: the setup-envtest store layout, for the
// platform this process runs on.
func DefaultAssetsDir() string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(os.Getenv("HOME"), ".local", "share")
	}
	return filepath.Join(data, "kubebuilder-envtest", "k8s", assetsDirName(runtime.GOOS, runtime.GOARCH))
}

// ControllerManagerBinary is the kube-controller-manager make assets built
// (hack/assets.sh): $STALEFUZZ_KUBE_CONTROLLER_MANAGER, else next to
// kube-apiserver in $KUBEBUILDER_ASSETS or DefaultAssetsDir.
func ControllerManagerBinary() string {
	return assetBinary("STALEFUZZ_KUBE_CONTROLLER_MANAGER", "kube-controller-manager")
}

// ControllerManagerBinaryAt is the kube-controller-manager of Kubernetes
// release version ("v1.35.4"): $STALEFUZZ_KUBE_CONTROLLER_MANAGER if set
// (an explicit binary wins), else ControllerManagerBinary for "" or
// KubernetesVersion, else kube-controller-manager-<version> beside it,
// where hack/kcm-version.sh builds it.
func ControllerManagerBinaryAt(version string) string {
	bin := ControllerManagerBinary()
	if version == "" || version == KubernetesVersion || os.Getenv("STALEFUZZ_KUBE_CONTROLLER_MANAGER") != "" {
		return bin
	}
	return bin + "-" + version
}

// SchedulerBinary is the kube-scheduler make assets built (hack/assets.sh):
// $STALEFUZZ_KUBE_SCHEDULER, else next to kube-apiserver in
// $KUBEBUILDER_ASSETS or DefaultAssetsDir.
func SchedulerBinary() string { return assetBinary("STALEFUZZ_KUBE_SCHEDULER", "kube-scheduler") }

// assetBinary is $env, else name next to kube-apiserver.
func assetBinary(env, name string) string {
	if b := os.Getenv(env); b != "" {
		return b
	}
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = DefaultAssetsDir()
	}
	return filepath.Join(dir, name)
}

// assetsDirName names a version's directory in the setup-envtest store:
// "1.37.1-darwin-arm64".
func assetsDirName(goos, goarch string) string {
	return strings.TrimPrefix(KubernetesVersion, "v") + "-" + goos + "-" + goarch
}

// AssetsDir returns the directory Start will take binaries from.
func (e *Environment) assetsDir() string {
	switch {
	case e.AssetsDir != "":
		return e.AssetsDir
	case os.Getenv("KUBEBUILDER_ASSETS") != "":
		return os.Getenv("KUBEBUILDER_ASSETS")
	default:
		return DefaultAssetsDir()
	}
}

// Start launches etcd and kube-apiserver and installs the CRDs. On error nothing
// it started is left running.
func (e *Environment) Start() (retErr error) {
	if e.env != nil {
		return errors.New("controlplane: Start called twice")
	}
	dir := e.assetsDir()
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(dir, bin)); err != nil || fi.IsDir() {
			return fmt.Errorf("%w: %s has no %s (run `make assets` to build them, or set KUBEBUILDER_ASSETS)", ErrAssetsMissing, dir, bin)
		}
	}

	work, err := os.MkdirTemp("", "stalefuzz-controlplane-")
	if err != nil {
		return fmt.Errorf("unable to create control plane working directory: %w", err)
	}
	e.workDir = work
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, e.Stop())
		}
	}()
	if e.reaper, err = reaper.New(work); err != nil {
		return err
	}
	etcd, err := e.reaper.Shim("etcd", filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	apiserver, err := e.reaper.Shim("kube-apiserver", filepath.Join(dir, "kube-apiserver"))
	if err != nil {
		return err
	}
	for _, d := range []string{"etcd-data", "certs"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o700); err != nil {
			return fmt.Errorf("unable to create %s directory: %w", d, err)
		}
	}

	env := &envtest.Environment{
		CRDInstallOptions:     e.CRDs,
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd, DataDir: filepath.Join(work, "etcd-data"), Out: e.Output, Err: e.Output}
	api := env.ControlPlane.GetAPIServer()
	api.Path = apiserver
	api.CertDir = filepath.Join(work, "certs")
	api.Out, api.Err = e.Output, e.Output
	// On SIGTERM, answer new requests 429 with Retry-After until those in
	// flight are done, then close every connection within 2 s, open watches
	// included: without it, an open watch holds the stop for up to the
	// apiserver's 60 s request timeout (and envtest kills it after 20 s).
	api.Configure().Set("shutdown-send-retry-after", "true")
	if len(e.FeatureGates) > 0 {
		var gates []string
		for _, name := range slices.Sorted(maps.Keys(e.FeatureGates)) {
			gates = append(gates, fmt.Sprintf("%s=%t", name, e.FeatureGates[name]))
		}
		api.Configure().Set("feature-gates", strings.Join(gates, ","))
	}
	e.env = env

	cfg, err := env.Start()
	if err != nil {
		// A start that failed after envtest made its webhook certificates
		// (a CRD the apiserver refused, say) leaves their directory, which
		// only envtest's Stop removes, and Stop is not called on a control
		// plane that never started.
		if certs := env.WebhookInstallOptions.LocalServingCertDir; certs != "" {
			env.WebhookInstallOptions.LocalServingCertDir = ""
			err = errors.Join(err, os.RemoveAll(certs))
		}
		return fmt.Errorf("unable to start control plane from %s: %w", dir, err)
	}
	e.Config = cfg
	// envtest always writes webhook serving certificates to a fresh
	// $TMPDIR/envtest-serving-certs-* directory, and only its Stop removes it:
	// a killed process would leave it behind. No webhook runs here, so
	// nothing reads them: remove the directory now.
	if certs := env.WebhookInstallOptions.LocalServingCertDir; certs != "" {
		env.WebhookInstallOptions.LocalServingCertDir = ""
		if err := os.RemoveAll(certs); err != nil {
			return fmt.Errorf("unable to remove envtest's webhook certificate directory %s: %w", certs, err)
		}
	}
	return nil
}

// StopAPIServer stops kube-apiserver alone and leaves etcd running, so that
// clients see the apiserver go away (a restart, an upgrade) while what it
// stored stays. It waits for the process to exit (KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT,
// 20 s by default, then it is killed). Stopping a stopped apiserver does
// nothing.
func (e *Environment) StopAPIServer() error {
	if e.env == nil || e.Config == nil {
		return errors.New("controlplane: StopAPIServer before a successful Start")
	}
	if e.apiDown {
		return nil
	}
	if err := e.env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("unable to stop kube-apiserver: %w", err)
	}
	e.apiDown = true
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same
// address, with the same certificates and etcd, so that Config and every
// kubeconfig made from it work again; it returns once the apiserver is
// healthy (KUBEBUILDER_CONTROLPLANE_START_TIMEOUT, 20 s by default). Like the
// first, it runs under the reaper. It fails if the port was taken
// meanwhile, leaving the apiserver stopped. Starting a running apiserver
// does nothing. Neither method is safe to call concurrently with another
// method of e.
func (e *Environment) StartAPIServer() error {
	if e.env == nil || e.Config == nil {
		return errors.New("controlplane: StartAPIServer before a successful Start")
	}
	if !e.apiDown {
		return nil
	}
	api := e.env.ControlPlane.APIServer
	if err := api.Start(); err != nil {
		// A process that started but did not become healthy is stopped.
		return errors.Join(fmt.Errorf("unable to start kube-apiserver again on %s: %w", e.Config.Host, err), api.Stop())
	}
	e.apiDown = false
	return nil
}

// Dir is the control plane's working directory. It is removed by Stop and,
// if this process dies, by the reaper: files that must not outlive the
// process belong under it.
func (e *Environment) Dir() string { return e.workDir }

// InstalledCRDs returns the CRDs Start installed (from CRDs, paths included).
func (e *Environment) InstalledCRDs() []*apiextensionsv1.CustomResourceDefinition {
	if e.env == nil {
		return nil
	}
	return e.env.CRDs
}

// Stop stops kube-apiserver and etcd, removes the working directory and ends
// the reaper. It is idempotent and returns every error it met; whatever it
// could not stop gracefully it kills.
func (e *Environment) Stop() error {
	e.stopped.Do(func() {
		var errs []error
		if e.env != nil && e.Config != nil {
			if err := e.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("unable to stop control plane: %w", err))
			}
		}
		// Whatever is still alive (a failed start, a failed stop) is killed
		// now, and the working directory removed.
		if e.reaper != nil {
			errs = append(errs, e.reaper.Stop())
		} else if e.workDir != "" {
			if err := os.RemoveAll(e.workDir); err != nil {
				errs = append(errs, fmt.Errorf("unable to remove %s: %w", e.workDir, err))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// PIDs returns the process IDs of the binaries Start launched that are running
// now (each is also its process group ID). envtest also runs the binaries
// briefly to read their versions; those have exited and are not listed.
func (e *Environment) PIDs() []int {
	if e.reaper == nil {
		return nil
	}
	return e.reaper.PIDs()
}
