#!/usr/bin/env bash
# kcm-version.sh VERSION: builds kube-controller-manager at another
# Kubernetes release (v1.35.4, say) than the pinned one (versions.sh), for
# a target whose builtins.kubernetes names it (fuzz/target's
# Builtins.Kubernetes; the recall method of issue 31 runs a target at the
# release before a fix). Prints the binary's path on its last line of
# standard output.
#
# The binary is cached beside the release's: $(envtest_assets_dir)/
# kube-controller-manager-VERSION (proxy/controlplane's
# ControllerManagerBinaryAt). A second call builds nothing.
#
# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, ...)
# with ./staging paths its module zip does not hold, so `go install
# k8s.io/kubernetes/cmd/kube-controller-manager@VERSION` is refused. This
# builds it inside a throwaway module that requires k8s.io/kubernetes@VERSION
# and replaces each of those staging modules with its published v0.Y.Z (the
# way hack/tools/kube-apiserver builds the pinned release), with the version
# ldflags Kubernetes' own build sets. The module is removed however the
# script ends. Cold: a few minutes on 2 cores (a download of the release's
# dependencies and a build).
#
# Against the pinned apiserver, an older kube-controller-manager is version
# skew: Kubernetes supports one minor release of it (kube-controller-manager
# older than kube-apiserver); two is beyond that policy. Say so beside any
# figure measured with it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"
[ $# -eq 1 ] || { echo "usage: kcm-version.sh VERSION (v1.35.4, say)" >&2; exit 2; }
version=$1
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "kcm-version: $version is not a Kubernetes release (v1.Y.Z)" >&2; exit 2; }
staging=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
dir=$(envtest_assets_dir)
mkdir -p "$dir"
if [ "$version" = "$K8S_VERSION" ]; then
	# The pinned release: make assets' binary.
	bin=$dir/kube-controller-manager
	[ -x "$bin" ] || { echo "kcm-version: $bin missing: run make assets" >&2; exit 2; }
	echo "$bin"
	exit 0
fi
bin=$dir/kube-controller-manager-$version
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qF "Kubernetes $version"; then
	echo "kcm-version: $bin present" >&2
	echo "$bin"
	exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/stalefuzz-kcm-version-XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work" "$dir/.kcm-$version.tmp"' EXIT
cd "$work"
export GOWORK=off GOFLAGS=-mod=mod
go mod init stalefuzz.local/kcm-version >/dev/null 2>&1
mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -n "$mod" ] || { echo "kcm-version: unable to download k8s.io/kubernetes@$version (is it served by the module proxy?)" >&2; exit 2; }
# Its go directive: building needs at least that Go.
gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$mod")
[ -n "$gover" ] && go mod edit -go="$gover"
edits=(-require="k8s.io/kubernetes@$version")
while read -r m; do
	edits+=(-replace="$m=$m@$staging")
done < <(sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*$|\1|p' "$mod")
[ ${#edits[@]} -gt 1 ] || { echo "kcm-version: k8s.io/kubernetes@$version's go.mod replaces no staging module: unexpected layout" >&2; exit 2; }
go mod edit "${edits[@]}"
cat >tools.go <<'EOF'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-controller-manager"
EOF
echo "kcm-version: resolving k8s.io/kubernetes@$version with $(( ${#edits[@]} - 1 )) staging modules at $staging" >&2
go mod tidy -e >&2 2>&1 | tail -5 >&2 || true
ld=$(K8S_VERSION=$version k8s_version_ldflags)
echo "kcm-version: building kube-controller-manager $version (a few minutes cold on 2 cores)" >&2
go build -trimpath -ldflags "-s -w $ld" -o "$dir/.kcm-$version.tmp" k8s.io/kubernetes/cmd/kube-controller-manager >&2
mv -f "$dir/.kcm-$version.tmp" "$bin"
"$bin" --version >&2
echo "$bin"
