#!/usr/bin/env bash
# fuzz-figures.sh TARGET PACKAGE RUNS BUDGET: time to the first finding of a
# fuzz target from an empty corpus (a copy of the working tree without the
# target's committed corpus, and an empty fuzz cache), RUNS times, and the
# median. The time is go test's whole wall clock up to the failure, control
# plane start and warm-up included; minimization is off.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
target=${1:?target}; pkg=${2:?package}; runs=${3:-5}; budget=${4:-120s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STALEFUZZ_FINDINGS="$work/.findings"
times=()
for i in $(seq 1 "$runs"); do
	rm -rf "$work"/* && fresh_copy "$work" "$target" "$pkg"
	go clean -fuzzcache
	start=$(date +%s%N)
	out=$(cd "$work" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$budget" -fuzzminimizetime=10x -parallel=1 "$pkg" 2>&1 || true)
	t=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN {printf "%.1f", ns / 1e9}')
	if grep -q -- '--- FAIL' <<<"$out"; then
		echo "run $i: finding after ${t}s: $(grep -m1 'schedule:' <<<"$out" | sed 's/^ *//')"
		times+=("$t")
	else
		echo "run $i: no finding within $budget"
	fi
done
if [ "${#times[@]}" -gt 0 ]; then
	printf '%s\n' "${times[@]}" | sort -n | awk -v n="$runs" '{a[NR]=$1} END {m = (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); printf "median time to finding: %.1fs (%d of %d runs found it)\n", m, NR, n}'
fi
