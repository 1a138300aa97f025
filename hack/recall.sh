#!/usr/bin/env bash
# recall.sh TARGET VERSION [RUNS] [TIME]: the recall method of issue 31
# (scenarios/recall-plan.md) on one target file: a copy of TARGET beside it
# with every pinned "@vX.Y.Z" of its controllers and CRDs replaced by
# "@VERSION" (.stalefuzz-composed-recall-VERSION[-NAME].yaml, gitignored, removed
# at the end), then RUNS (default 5) campaigns of TIME (default 10m), one
# worker each, each from an empty corpus and ending at its first finding.
# Prints, per campaign, the first finding's time, violation and replay
# command, then how many campaigns found one. Findings go to
# RECALL_OUT/VERSION-N (default $TMPDIR/stalefuzz-recall/<target>). Extra
# arguments for stalefuzz fuzz (--search-on, --patch NAME=FILE) go in
# RECALL_FLAGS. The target's known findings stay as the file has them:
# remove them from a copy first when the method asks for it.
# RECALL_KNOWN=FILE, for the supplementary runs (not the method) that
# declare another bug known so that campaigns search past it: FILE is a
# YAML list of oracles.known entries (fuzz/target's Known), added to the
# copy, which is then named ...-VERSION-<FILE's name>.yaml, with findings
# in RECALL_OUT-<FILE's name>. A target that
# pins kube-controller-manager (builtins.controllerManager:
# k8s.io/kubernetes@vX.Y.Z) gets VERSION's, built by hack/kcm-version.sh.
# RECALL_SED, for a spelling that differs between releases (a flag renamed:
# argo-rollouts v1.7.2 spells --metricsPort --metricsport): sed -E
# expressions, separated by ';', applied to the copy after the version;
# the run prints them. Never for the workload or the faults: the method
# keeps the target as the hunt runs it.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: hack/recall.sh TARGET VERSION [RUNS] [TIME]" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
target=$1 version=$2 runs=${3:-5} time=${4:-10m}
[ -f "$target" ] || { echo "recall: $target: no such target file" >&2; exit 2; }
name=$(basename "$(dirname "$target")")-$(basename "$target" .yaml)
out=${RECALL_OUT:-${TMPDIR:-/tmp}/stalefuzz-recall/$name}
# A gitignored copy as TARGET (.stalefuzz-composed-NAME.yaml: the file with
# known entries added, say) gets a copy of its own, so that campaigns of it
# and of the committed file can run at once.
suffix=
case $(basename "$target" .yaml) in .stalefuzz-composed-*) suffix=-$(basename "$target" .yaml | sed 's/^\.stalefuzz-composed-//') ;; esac
copy=$(dirname "$target")/.stalefuzz-composed-recall-$version$suffix.yaml
known=${RECALL_KNOWN:-}
if [ -n "$known" ]; then
	[ -f "$known" ] || { echo "recall: RECALL_KNOWN=$known: no such file" >&2; exit 2; }
	copy=${copy%.yaml}-$(basename "$known" .yaml).yaml
	out=$out-$(basename "$known" .yaml)
fi
trap 'rm -f "$copy"' EXIT
sed -E "s/@v[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.]+)?/@$version/g" "$target" > "$copy"
grep -q "@$version" "$copy" || { echo "recall: $target pins no @vX.Y.Z version to replace" >&2; exit 2; }
if [ -n "${RECALL_SED:-}" ]; then
	sed -E "$RECALL_SED" "$copy" > "$copy.tmp" && mv -f "$copy.tmp" "$copy" || { echo "recall: RECALL_SED=$RECALL_SED: not a sed -E script" >&2; exit 2; }
	! cmp -s "$copy" <(sed -E "s/@v[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.]+)?/@$version/g" "$target") || { echo "recall: RECALL_SED=$RECALL_SED changed nothing in $target" >&2; exit 2; }
	echo "recall: the copy differs from $target in its version and by RECALL_SED: $RECALL_SED"
fi
if [ -n "$known" ]; then
	grep -q '^oracles:' "$copy" || { echo "recall: $target has no oracles: section for RECALL_KNOWN's entries" >&2; exit 2; }
	! grep -qE '^  known:' "$copy" || { echo "recall: $target declares known findings already: the method runs it without them; add RECALL_KNOWN's to a copy without them" >&2; exit 2; }
	awk -v f="$known" '{ print } /^oracles:/ { print "  known:"; while ((getline l < f) > 0) if (l !~ /^[[:space:]]*(#|$)/) print "    " l }' "$copy" > "$copy.tmp" && mv -f "$copy.tmp" "$copy"
fi
# A target that pins kube-controller-manager (builtins.controllerManager)
# runs that release's binary: build it first (cached after the first time).
if grep -qE "controllerManager:[[:space:]]*k8s\.io/kubernetes@$version" "$copy"; then
	"$here/kcm-version.sh" "$version" >/dev/null || { echo "recall: unable to build kube-controller-manager $version" >&2; exit 2; }
fi
bin=$out/stalefuzz
mkdir -p "$out"
go build -o "$bin" ./proxy/cmd/stalefuzz || exit 2
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
found=0
for i in $(seq 1 "$runs"); do
	dir=$out/$version-$i
	rm -rf "$dir"
	log=$out/$version-$i.txt
	# shellcheck disable=SC2086 # RECALL_FLAGS is a list of flags
	"$bin" fuzz "$copy" --time "$time" --workers 1 --findings "$dir" ${RECALL_FLAGS:-} >"$log" 2>&1
	first=$(grep -m1 -E '^result: FINDING' "$log")
	if [ -n "$first" ]; then
		found=$((found + 1))
		echo "campaign $i: $first"
		grep -m1 -E '^\s+(violation:|\[)' "$log" | sed 's/^/  /'
		grep -m1 -E 'stalefuzz replay ' "$log" | sed 's/^/  /'
	else
		echo "campaign $i: $(grep -m1 -E '^result:' "$log" || echo 'no result line: see '"$log")"
	fi
	grep -m1 -E '^figures: [0-9]+ executions' "$log" | sed 's/^/  /'
done
echo "recall $target at $version: found in $found of $runs campaigns of $time (logs and findings in $out)"
