#!/usr/bin/env bash
# certmanager-version.sh VERSION: cert-manager's controller main
# (scenarios/certmanager/controller, written against v1.21.2) as a module
# of its own that requires github.com/cert-manager/cert-manager@VERSION,
# for the recall method of issue 31 (scenarios/certmanager/README.md,
# "Recall"). Prints the module's directory on its last line of standard
# output; a target file names it as its controller's go: path.
#
# cert-manager's own main (cmd/controller) is a module the Go module proxy
# does not serve, so the target links the published packages the way that
# main does. Older releases' packages differ; each change below is made
# only when VERSION's source lacks what the main uses, and none changes
# what the controllers do:
#   - CertificateOptions' CertificateRequest{Minimum,Maximum}BackoffDuration
#     (new in v1.20 and v1.21): left out; those releases fix the backoff in
#     code (trigger_controller.go's maxDelay);
#   - a controller's Run takes a stop channel, not a context (v1.12, v1.13);
#   - NewContextFactory leaves the metrics and the clock to the caller
#     (v1.12, v1.13), who gives them (metrics.New, clock.RealClock) as
#     cmd/controller/app did.
# The module's go directive is 1.22 (the main relies on per-iteration loop
# variables); go mod tidy resolves the rest from VERSION's own go.mod.
#
# Cached in ${XDG_CACHE_HOME:-~/.cache}/stalefuzz/certmanager/controller-VERSION;
# a second call changes nothing. stalefuzz builds (and caches) the binary.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: hack/certmanager-version.sh VERSION (v1.12.14, say)" >&2; exit 2; }
version=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod=github.com/cert-manager/cert-manager
parent=${XDG_CACHE_HOME:-$HOME/.cache}/stalefuzz/certmanager
dir=$parent/controller-$version
if [ -f "$dir/go.sum" ]; then echo "$dir"; exit 0; fi
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod
src=$(go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src/pkg/controller" ] || { echo "certmanager-version: $mod@$version: the module proxy did not serve it (go mod download $mod@$version)" >&2; exit 1; }
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.controller-$version.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$here/../scenarios/certmanager/controller/main.go" "$tmp/"
cd "$tmp"
for f in CertificateRequestMinimumBackoffDuration CertificateRequestMaximumBackoffDuration; do
	grep -q "$f" "$src/pkg/controller/context.go" || sed -i "/\b$f:/d" main.go
done
grep -q 'time\.' main.go || sed -i '/^\t"time"$/d' main.go
if grep -q 'Run(workers int, stopCh <-chan struct{})' "$src/pkg/controller/register.go"; then
	sed -i 's/c\.Run(\*workers, ctx)/c.Run(*workers, ctx.Done())/' main.go
fi
if ! grep -q 'Metrics: ' "$src/pkg/controller/context.go"; then
	sed -i 's|^\t\tNamespace: *\*namespace,$|&\n\t\t// This release leaves the metrics and the clock to the caller (cmd/controller/app gave them).\n\t\tMetrics: metrics.New(log, clock.RealClock{}),\n\t\tClock:   clock.RealClock{},|' main.go
	sed -i 's|^\tlogf "github.com/cert-manager/cert-manager/pkg/logs"$|&\n\t"github.com/cert-manager/cert-manager/pkg/metrics"\n\t"k8s.io/utils/clock"|' main.go
fi
gofmt -w main.go
printf 'module github.com/stalefuzz/stalefuzz/scenarios/certmanager/controller\n\ngo 1.22\n\nrequire %s %s\n' "$mod" "$version" > go.mod
go mod tidy >&2
sed -i 's/^go .*/go 1.22/' go.mod
go build -o /dev/null . >&2
trap - EXIT
rm -rf "$dir"
mv "$tmp" "$dir"
echo "$dir"
