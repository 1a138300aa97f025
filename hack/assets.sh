#!/usr/bin/env bash
# assets.sh builds the envtest control plane (kube-apiserver and etcd),
# kube-controller-manager and kube-scheduler from Go
# modules, because setup-envtest cannot download release archives on machines
# without internet access. Binaries go to the setup-envtest store layout, outside
# the repository, so a store that setup-envtest already filled is reused and a
# fresh clone does not rebuild:
#
#   ${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest/k8s/<k8s>-<goos>-<goarch>/
#
# (<goos>-<goarch> from go env: linux-amd64, darwin-arm64, ...)
#
# Idempotent: a binary that is present and reports the pinned version is kept.
# KUBEBUILDER_ASSETS, when set, names the directory to fill instead.
# Prints the directory on its last line of standard output.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"

dir=$(envtest_assets_dir)
mkdir -p "$dir"

log() { printf 'assets: %s\n' "$*" >&2; }

# have BIN WANT: true if $dir/BIN exists and its --version output contains WANT.
# The output is captured before it is searched: piping it into grep -q races
# (grep exits at the first match, the binary's next write gets SIGPIPE, and
# pipefail turns a match into a failure).
have() {
	local out
	[ -x "$dir/$1" ] || return 1
	out=$("$dir/$1" --version 2>/dev/null) || return 1
	grep -qF -- "$2" <<<"$out"
}

# build NAME MODULE_DIR PKG [LDFLAGS]: go build PKG from MODULE_DIR into $dir/NAME,
# through a temporary name so an interrupted build never leaves a half binary.
build() {
	local name=$1 moddir=$2 pkg=$3 ldflags=${4:-}
	local start=$SECONDS
	log "building $name from $pkg (module $moddir) into $dir"
	(
		cd "$moddir"
		go build -trimpath -ldflags "-s -w $ldflags" -o "$dir/.$name.tmp" "$pkg"
	) &
	local pid=$!
	# Progress while the (long) build runs.
	while kill -0 "$pid" 2>/dev/null; do
		sleep 15 &
		wait $! || true
		kill -0 "$pid" 2>/dev/null && log "still building $name ($((SECONDS - start))s)"
	done
	wait "$pid"
	mv -f "$dir/.$name.tmp" "$dir/$name"
	log "built $name in $((SECONDS - start))s"
}

if have etcd "etcd Version: ${ETCD_VERSION#v}"; then
	log "etcd ${ETCD_VERSION} present in $dir"
else
	build etcd "$here/tools/etcd" .
fi

# The version ldflags kubernetes' own build sets (versions.sh).
ld=$(k8s_version_ldflags)

# kube-apiserver, kube-controller-manager (the target of scenarios/kcm and the
# builtins of target files) and kube-scheduler (target files' builtins, where
# Pods must be bound to a Node) from the same tools module, so all three are
# built from one set of module versions.
cmds=(kube-apiserver kube-controller-manager kube-scheduler)
for cmd in "${cmds[@]}"; do
	if have "$cmd" "Kubernetes ${K8S_VERSION}"; then
		log "$cmd ${K8S_VERSION} present in $dir"
	else
		log "cold build of $cmd: about 5 minutes on 2 cores for the first of these, 1-2 minutes for kube-controller-manager and 15 s for kube-scheduler after it (a shared build cache)"
		build "$cmd" "$here/tools/kube-apiserver" "k8s.io/kubernetes/cmd/$cmd" "$ld"
	fi
done

have etcd "etcd Version: ${ETCD_VERSION#v}" || { log "etcd in $dir does not report ${ETCD_VERSION}"; exit 1; }
for cmd in "${cmds[@]}"; do
	have "$cmd" "Kubernetes ${K8S_VERSION}" || { log "$cmd in $dir does not report ${K8S_VERSION}"; exit 1; }
done
echo "$dir"
