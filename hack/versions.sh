# versions.sh: the pinned versions of what hack/ builds, and where it puts them.
# Sourced by the build scripts; the Go side (proxy/controlplane) mirrors these.
K8S_VERSION=v1.37.1
ETCD_VERSION=v3.6.16

# envtest_assets_dir prints where the control plane binaries live:
# KUBEBUILDER_ASSETS when set, else the setup-envtest store's directory for
# the platform go builds for (proxy/controlplane's DefaultAssetsDir).
envtest_assets_dir() {
	if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
		echo "$KUBEBUILDER_ASSETS"
	else
		echo "${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest/k8s/${K8S_VERSION#v}-$(go env GOOS)-$(go env GOARCH)"
	fi
}

# k8s_version_ldflags prints the version ldflags Kubernetes' own build sets,
# under both packages that report it, for K8S_VERSION.
k8s_version_ldflags() {
	local major minor ld="" p
	major=${K8S_VERSION#v}; major=${major%%.*}
	minor=${K8S_VERSION#v}; minor=${minor#*.}; minor=${minor%%.*}
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=${major} -X $p.gitMinor=${minor}"
		ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	echo "$ld"
}
