#!/usr/bin/env bash
# recall-certmanager.sh [VERSION...]: issue 31's recall method on
# cert-manager's target file (scenarios/certmanager/target.yaml) at other
# releases (default v1.12.14 v1.13.0: cert-manager#4956, before and after
# StableCertificateRequestName was on by default). Its controller is a main
# of this repository's, not a module at a version, so hack/recall.sh's
# version swap cannot reach it: each release gets its main built against it
# (hack/certmanager-version.sh), named by a copy of the target file, which
# hack/recall.sh then runs (RUNS and TIME as RECALL_RUNS, RECALL_TIME;
# default 5 campaigns of 10m, each to its first finding).
# The method runs the file without its known findings. RECALL_SUPPLEMENTARY=1
# keeps them (the hunt's file as it is, not the method: campaigns then
# search past this target's own findings 1 and 2). Findings go to
# RECALL_OUT (default $TMPDIR/stalefuzz-recall/certmanager-VERSION[-known]).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
[ $# -gt 0 ] || set -- v1.12.14 v1.13.0
for v in "$@"; do
	dir=$(hack/certmanager-version.sh "$v" | tail -1) || exit 2
	name=cm-$v
	[ -n "${RECALL_SUPPLEMENTARY:-}" ] && name=$name-known
	copy=scenarios/certmanager/.stalefuzz-composed-$name.yaml
	sed "s#go: ./controller#go: $dir#" scenarios/certmanager/target.yaml |
		if [ -n "${RECALL_SUPPLEMENTARY:-}" ]; then cat; else awk '/^  known:/ { skip = 1; next } skip && /^[^ ]/ { skip = 0 } skip && /^    / { next } { skip = 0; print }'; fi > "$copy"
	RECALL_OUT=${RECALL_OUT:-${TMPDIR:-/tmp}/stalefuzz-recall/certmanager-$v${RECALL_SUPPLEMENTARY:+-known}} \
		hack/recall.sh "$copy" "$v" "${RECALL_RUNS:-5}" "${RECALL_TIME:-10m}"
	rc=$?
	rm -f "$copy"
	[ $rc -eq 0 ] || exit $rc
done
