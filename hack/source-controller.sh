#!/usr/bin/env bash
# source-controller.sh builds the FluxCD source-controller from its Go module
# (through the tools module hack/tools/source-controller, because the upstream
# module has replace directives and cannot be built with `go install pkg@version`)
# and puts it, with the CRDs of the same version, outside the repository:
#
#   ${XDG_DATA_HOME:-$HOME/.local/share}/stalefuzz/source-controller/<version>/
#       source-controller      the binary
#       source-controller.stamp  version and sha256 of the tools go.sum it was built from
#       crds/*.yaml            config/crd/bases of the same module version
#
# Idempotent: the binary does not report its version, so it is kept when the stamp
# next to it names the pinned version and the current tools go.sum; a build goes
# through a temporary name so an interrupted build never leaves a half binary.
# STALEFUZZ_SOURCE_CONTROLLER, when set, names a binary to use as-is: nothing is
# built, and the CRDs are copied next to it if its directory has none.
# Prints the binary path on its last line of standard output.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
source "$here/versions.sh"

moddir="$here/tools/source-controller"
module=github.com/fluxcd/source-controller
version=$SOURCE_CONTROLLER_VERSION

log() { printf 'source-controller: %s\n' "$*" >&2; }

# The tools module is what gets built; refuse to stamp it with a version it does not pin.
if ! grep -qE "^[[:space:]]*${module//./\\.} ${version//./\\.}([[:space:]]|$)" "$moddir/go.mod"; then
	log "$moddir/go.mod does not require $module $version (versions.sh pins it); update one of them"
	exit 1
fi

# crds_present DIR: true if DIR/crds holds at least one CRD.
crds_present() {
	compgen -G "$1/crds/*.yaml" >/dev/null
}

# copy_crds DIR: copy config/crd/bases of the pinned module into DIR/crds, through
# a temporary directory so that DIR/crds is always complete or absent.
copy_crds() {
	local dir=$1 src
	src=$(cd "$moddir" && go mod download "$module" && go list -m -f '{{.Dir}}' "$module")
	if ! compgen -G "$src/config/crd/bases/*.yaml" >/dev/null; then
		log "no CRDs in $src/config/crd/bases"
		exit 1
	fi
	rm -rf "$dir/.crds.tmp"
	mkdir -p "$dir/.crds.tmp"
	# install, not cp: module cache files are read-only and would stay so.
	install -m 0644 "$src"/config/crd/bases/*.yaml "$dir/.crds.tmp/"
	rm -rf "$dir/crds"
	mv "$dir/.crds.tmp" "$dir/crds"
	log "copied $(find "$dir/crds" -name '*.yaml' | wc -l) CRDs from $src/config/crd/bases to $dir/crds"
}

if [ -n "${STALEFUZZ_SOURCE_CONTROLLER:-}" ]; then
	bin=$STALEFUZZ_SOURCE_CONTROLLER
	if [ ! -x "$bin" ] || [ -d "$bin" ]; then
		log "STALEFUZZ_SOURCE_CONTROLLER=$bin is not an executable file"
		exit 1
	fi
	log "using $bin as-is (STALEFUZZ_SOURCE_CONTROLLER)"
	dir=$(cd "$(dirname "$bin")" && pwd)
	bin="$dir/$(basename "$bin")"
	crds_present "$dir" || copy_crds "$dir"
	echo "$bin"
	exit 0
fi

dir="${XDG_DATA_HOME:-$HOME/.local/share}/stalefuzz/source-controller/$version"
bin="$dir/source-controller"
stamp="$bin.stamp"
want="$module $version go.sum:$(sha256sum "$moddir/go.sum" | cut -d' ' -f1)"
mkdir -p "$dir"

if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	log "$version present in $dir"
else
	start=$SECONDS
	log "building $module $version (module $moddir) into $dir"
	log "cold build takes about 300 CPU-seconds (8.5 minutes on 2 busy cores); a warm go build cache makes it a relink"
	rm -f "$stamp"
	pid=
	# Whatever happens to this script, the build it started does not outlive it.
	trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$dir/.source-controller.tmp"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	(
		cd "$moddir"
		# As upstream's Dockerfile: static, no cgo. exec, so $pid is go itself.
		export CGO_ENABLED=0
		exec go build -trimpath -ldflags "-s -w" -o "$dir/.source-controller.tmp" "$module"
	) &
	pid=$!
	# Progress while the (long) build runs.
	while kill -0 "$pid" 2>/dev/null; do
		sleep 15 &
		wait $! || true
		kill -0 "$pid" 2>/dev/null && log "still building source-controller ($((SECONDS - start))s)"
	done
	if ! wait "$pid"; then
		pid=
		log "go build of $module $version failed"
		exit 1
	fi
	pid=
	trap - EXIT INT TERM
	mv -f "$dir/.source-controller.tmp" "$bin"
	printf '%s\n' "$want" >"$stamp"
	log "built source-controller in $((SECONDS - start))s"
fi

crds_present "$dir" || copy_crds "$dir"
echo "$bin"
