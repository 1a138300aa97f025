#!/usr/bin/env bash
# fuzz-figures.sh TARGET PACKAGE RUNS BUDGET: time to the first finding of a
# fuzz target from an empty corpus (no committed corpus, a fuzz cache of its
# own), RUNS times, and the median. The test binary is built once (go test -c
# -fuzz, timed apart); each run is timed from the binary's start to its
# failure, the coordinator's reference runs, the control plane's start and
# the warm-up included. Workers: STALEFUZZ_WORKERS (default 1: a first
# finding from a seed comes as fast with one; fuzz.sh defaults to 2).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
target=${1:?target}; pkg=${2:?package}; runs=${3:-5}; budget=${4:-120s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STALEFUZZ_FINDINGS="$work/.findings"
built=$(date +%s%N)
build_fuzz_binary "$target" "$pkg" "$work/$target.test"
echo "built the test binary (go test -c -fuzz) in $(awk -v ns=$(($(date +%s%N) - built)) 'BEGIN {printf "%.1f", ns / 1e9}')s; each run below is timed from the binary's start"
times=()
origins=()
for i in $(seq 1 "$runs"); do
	mkdir "$work/run-$i"
	export STALEFUZZ_CAMPAIGN="$work/run-$i/.campaign"
	mkdir -m 0700 "$STALEFUZZ_CAMPAIGN"
	start=$(date +%s%N)
	status=0
	run_campaign "$work/$target.test" "$target" "$work/run-$i" "$budget" "${STALEFUZZ_WORKERS:-1}" >"$work/run-$i.log" 2>&1 || status=$?
	t=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN {printf "%.1f", ns / 1e9}')
	cat "$STALEFUZZ_CAMPAIGN"/stats-*.log 2>/dev/null | sed "s/^/run $i: figures: /"
	case $(outcome "$work/run-$i.log" "$status") in
	finding)
		origin=$(grep -m1 -oE '^ *input: [0-9a-f]* \(from [^)]*\)' "$work/run-$i.log" | sed -E 's/.*\(from (.*)\)/\1/')
		echo "run $i: finding after ${t}s, from ${origin:-?}: $(grep -m1 'schedule:' "$work/run-$i.log" | sed 's/^ *//')"
		origins+=("${origin:-?}")
		times+=("$t")
		;;
	harness)
		# A failure that is not a finding: say what it was, and count the
		# run as one without a finding.
		echo "run $i: HARNESS FAILURE after ${t}s, not a finding (exit $status):"
		grep -v '^fuzz: elapsed' "$work/run-$i.log" | tail -n 15 | sed 's/^/    /'
		;;
	*)
		echo "run $i: no finding within $budget"
		;;
	esac
done
# Where the findings came from: a seed (the scenario's, or one derived from
# the reference run) or the mutator.
if [ "${#origins[@]}" -gt 0 ]; then
	printf '%s\n' "${origins[@]}" | sed -E 's/ [0-9]+$//' | sort | uniq -c | awk -v n="${#origins[@]}" '{c = $1; $1 = ""; printf "findings from%s: %d of %d\n", $0, c, n}'
fi
# The median is over all RUNS, a run without a finding counting as longer than
# BUDGET: when fewer than half the runs found something, the median is only
# known to exceed the budget.
{ [ "${#times[@]}" -eq 0 ] || printf '%s\n' "${times[@]}"; } | sort -n | awk -v n="$runs" -v budget="$budget" '
	{ a[NR] = $1 }
	END {
		found = NR
		if (found == 0) { printf "median time to finding: > %s (no run found anything)\n", budget; exit }
		if (n % 2) { k1 = k2 = (n + 1) / 2 } else { k1 = n / 2; k2 = k1 + 1 }
		if (k2 > found) { printf "median time to finding: > %s (%d of %d runs found it, in %s)\n", budget, found, n, list(found); exit }
		printf "median time to finding: %.1fs (%d of %d runs found it, in %s)\n", (a[k1] + a[k2]) / 2, found, n, list(found)
	}
	function list(m,   i, s) { for (i = 1; i <= m; i++) s = s (i > 1 ? ", " : "") a[i] "s"; return s }'

