// Package controlplane starts a real kube-apiserver and etcd under
// controller-runtime's envtest, from binaries that hack/assets.sh builds from Go
// modules, and guarantees that neither outlives the process that started them.
//
// # Guarantees
//
// Start either returns a running control plane or an error that says what is
// missing (for absent binaries: which directory was searched and that
// `make assets` builds them); a partial start is rolled back. Stop is idempotent
// and returns every error it met.
//
// No process Start launches survives the test binary, whatever way it exits:
// Stop, a failed Start, a panic, os.Exit, SIGINT or SIGKILL. The binaries run
// under a reaper (package proxy/reaper): each is launched through a shim that
// records its PID before exec'ing it, and if this process dies without Stop,
// the reaper kills the process group of every recorded PID and removes the
// working directory (certificates, etcd data). envtest starts each binary as
// a process group leader, so killing the group reaches it.
//
// # Restarting kube-apiserver
//
// StopAPIServer stops kube-apiserver alone, with SIGTERM, and leaves etcd
// running; StartAPIServer starts it again on the same address with the same
// certificates, so that Config, and every kubeconfig and proxy pointed at
// it, work again with what etcd stored. kube-apiserver runs with
// --shutdown-send-retry-after: once stopping, it answers new requests 429
// with Retry-After until those in flight are done, then closes every
// connection, open watches included, within 2 s, and exits (about a second
// here). Without it an open watch would hold its exit for up to the 60 s
// request timeout.
//
// # Environment variables
//
//   - KUBEBUILDER_ASSETS: directory holding kube-apiserver and etcd. Wins over
//     the default.
//   - XDG_DATA_HOME, HOME: locate the default setup-envtest store,
//     ${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest/k8s/1.37.1-<GOOS>-<GOARCH>,
//     for the platform the test binary runs on (1.37.1-linux-amd64,
//     1.37.1-darwin-arm64, ...).
//   - envtest's own, read by envtest itself: KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT,
//     KUBEBUILDER_CONTROLPLANE_START_TIMEOUT, KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT.
package controlplane
