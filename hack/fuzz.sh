#!/usr/bin/env bash
# fuzz.sh TARGET PACKAGE DURATION: a bounded fuzz campaign from an empty
# corpus (without TARGET's committed corpus, and with a fuzz cache of its own,
# so that it really searches; the repository is not touched). Prints the campaign's
# progress, then the finding (report, trace path, input) or that there was
# none, and the execution figures.
#
# The test binary is built in place with go test -c -fuzz (Go's build cache
# keeps it: the next campaign links nothing) and run in a scratch directory
# (hack/lib.sh: run_campaign).
#
# Workers: STALEFUZZ_WORKERS (default 2). Each worker runs its own control
# plane. On 2 cores two workers run about twice the executions of one (an
# execution mostly waits: lag windows, quiet periods), so two are the
# default; a campaign whose finding is a seed finds it about as fast with one.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
target=${1:?target}; pkg=${2:?package}; duration=${3:?duration}
workers=${STALEFUZZ_WORKERS:-2}
export STALEFUZZ_FINDINGS=${STALEFUZZ_FINDINGS:-${TMPDIR:-/tmp}/stalefuzz-findings}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# This campaign's own directory (the workers' stats, harness errors, why a
# worker could not start): another campaign's never mixes in.
export STALEFUZZ_CAMPAIGN=$work/campaign
mkdir -m 0700 "$STALEFUZZ_CAMPAIGN"

echo "fuzz: $target in $pkg for $duration from an empty corpus ($workers worker(s)); traces of findings go to $STALEFUZZ_FINDINGS"
echo "fuzz: compiling the coverage-instrumented test binary (go test -c -fuzz): about 4.5 min on a fresh machine (every dependency is instrumented), about a second once Go's build cache has it"
start=$SECONDS
if ! build_fuzz_binary "$target" "$pkg" "$work/$target.test"; then
	echo "result: the test binary did not build"
	exit 1
fi
echo "fuzz: built in $((SECONDS - start))s; the campaign starts a control plane, then executes"
run_campaign "$work/$target.test" "$target" "$work" "$duration" "$workers" 2>&1 | progress "$STALEFUZZ_CAMPAIGN" | tee "$work/.log"
status=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))

# Executions: the workers' own count, the one count of the campaign (go
# test's own leaves out the corpus replay, where a seed's finding happens,
# and minimization).
echo
echo "figures: $target: $(executions "$STALEFUZZ_CAMPAIGN") executions, ${elapsed}s wall clock in all (build, control plane start and warm-up included)"
cat "$STALEFUZZ_CAMPAIGN"/stats-*.log 2>/dev/null | sed 's/^/figures: /'
# A campaign's harness errors (executions that could not be judged, never
# findings) are kept where the findings go.
for log in harness-errors.log worker-errors.log; do
	if [ -s "$STALEFUZZ_CAMPAIGN/$log" ]; then
		kept="$STALEFUZZ_FINDINGS/$target-$(date +%Y%m%d-%H%M%S)-$$-$log"
		mkdir -p -m 0700 "$STALEFUZZ_FINDINGS" && cp "$STALEFUZZ_CAMPAIGN/$log" "$kept"
		echo "figures: $(wc -l <"$kept") lines of ${log%.log} (not findings): $kept"
	fi
done
case $(outcome "$work/.log" "$status") in
finding)
	echo "result: FINDING after ${elapsed}s (report above). To keep its input as a regression row, in ${pkg}:"
	grep -m1 -oE 'keep it as a regression row: .*' "$work/.log" | sed 's/^keep it as a regression row: /  /'
	exit 0
	;;
harness)
	echo "result: HARNESS FAILURE after ${elapsed}s, not a finding (exit $status): the campaign could not run; its log ends:"
	grep -v '^fuzz: elapsed' "$work/.log" | tail -n 15 | sed 's/^/  /'
	exit "$status"
	;;
esac
echo "result: no finding in $duration"
