#!/usr/bin/env bash
# kcm-patched.sh PATCH...: builds kube-controller-manager at the pinned
# Kubernetes version (versions.sh) with each PATCH (a unified diff against
# the k8s.io/kubernetes module, paths relative to its root: patch -p1)
# applied, and prints the binary's path on its last line of standard output.
# Run a Go scenario of scenarios/kcm with it through
# STALEFUZZ_KUBE_CONTROLLER_MANAGER:
#
#   STALEFUZZ_KUBE_CONTROLLER_MANAGER=$(hack/kcm-patched.sh scenarios/kcm/fix/compare-cached-lease.patch) \
#     go test -run='^FuzzNodeLifecycleGateOn/f1c8c1534d751e6b$' -count=20 ./scenarios/kcm/
#
# The binary is cached beside the release's, under a name keyed by the
# patches' contents (kube-controller-manager-patched-HASH): a second call
# with the same patches builds nothing. The module cache is never changed:
# the patches apply to a copy of k8s.io/kubernetes, replaced into a copy of
# hack/tools/kube-apiserver's go.mod (the one make assets builds from), and
# both copies are removed however the script ends. A patch that does not
# apply is an error naming it (exit 2).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"
[ $# -gt 0 ] || { echo "usage: kcm-patched.sh PATCH..." >&2; exit 2; }
patches=()
for p in "$@"; do
	[ -f "$p" ] || { echo "kcm-patched: no patch file $p" >&2; exit 2; }
	patches+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done
dir=$(envtest_assets_dir)
mkdir -p "$dir"
hash=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
bin=$dir/kube-controller-manager-patched-$hash
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qF "Kubernetes ${K8S_VERSION}"; then
	echo "kcm-patched: $bin present" >&2
	echo "$bin"
	exit 0
fi
src=$(cd "$here/tools/kube-apiserver" && GOWORK=off go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "kcm-patched: unable to download k8s.io/kubernetes@${K8S_VERSION}" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/stalefuzz-kcm-patched-XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$work/kubernetes" "$work/tools"
cp -r "$src/." "$work/kubernetes/" && chmod -R u+w "$work/kubernetes"
for p in "${patches[@]}"; do
	echo "kcm-patched: applying $p" >&2
	(cd "$work/kubernetes" && patch -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch -r - -i "$p" >&2) ||
		{ echo "kcm-patched: patch $p does not apply to k8s.io/kubernetes@${K8S_VERSION}" >&2; exit 2; }
done
cp "$here/tools/kube-apiserver/go.mod" "$here/tools/kube-apiserver/go.sum" "$work/tools/"
(cd "$work/tools" && go mod edit -replace="k8s.io/kubernetes=$work/kubernetes")
# The version ldflags kubernetes' own build sets (versions.sh).
ld=$(k8s_version_ldflags)
echo "kcm-patched: building kube-controller-manager ${K8S_VERSION} with ${#patches[@]} patch(es) (1-2 minutes with make assets' build cache)" >&2
(cd "$work/tools" && GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ld" -o "$dir/.kcm-patched-$hash.tmp" k8s.io/kubernetes/cmd/kube-controller-manager >&2)
mv -f "$dir/.kcm-patched-$hash.tmp" "$bin"
echo "$bin"
