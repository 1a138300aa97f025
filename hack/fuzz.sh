#!/usr/bin/env bash
# fuzz.sh TARGET PACKAGE DURATION: a bounded fuzz campaign from an empty
# corpus (in a copy of the working tree without TARGET's committed corpus, and
# with an empty fuzz cache, so that it really searches). Prints the campaign's
# progress, then the finding (report, trace path, input) or that there was
# none, and the execution figures.
#
# Minimization is capped at 10 executions per input (-fuzzminimizetime=10x):
# go test minimizes every new interesting input, 60 s each by default, and an
# execution here takes about a second.
#
# Workers: STALEFUZZ_WORKERS (default 1). Each worker runs its own control
# plane; on 2 cores one worker leaves the other core to the apiserver.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
target=${1:?target}; pkg=${2:?package}; duration=${3:?duration}
workers=${STALEFUZZ_WORKERS:-1}
export STALEFUZZ_FINDINGS=${STALEFUZZ_FINDINGS:-${TMPDIR:-/tmp}/stalefuzz-findings}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh_copy "$work" "$target" "$pkg"
go clean -fuzzcache

echo "fuzz: $target in $pkg for $duration from an empty corpus ($workers worker(s)); traces of findings go to $STALEFUZZ_FINDINGS"
echo "fuzz: compiling the coverage-instrumented test binary first: about 4.5 min on a fresh machine (every dependency is instrumented), seconds once Go's build cache has it; the next campaign reuses it"
rm -f "$STALEFUZZ_FINDINGS"/stats-*.log
start=$SECONDS
(cd "$work" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$duration" -fuzzminimizetime=10x -parallel="$workers" "$pkg") 2>&1 | tee "$work/.log"
status=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))

execs=$(grep -oE 'execs: [0-9]+' "$work/.log" | tail -1 | grep -oE '[0-9]+')
first=$(grep -m1 -oE 'elapsed: [0-9]+s, execs: [1-9][0-9]*' "$work/.log" | grep -oE '^elapsed: [0-9]+' | grep -oE '[0-9]+')
echo
echo "figures: $target: ${execs:-0} executions, ${elapsed}s wall clock in all (control plane start and warm-up included; first execution reported at ${first:-?}s)"
cat "$STALEFUZZ_FINDINGS"/stats-*.log 2>/dev/null | sed 's/^/figures: /'
if grep -q -- '--- FAIL' "$work/.log"; then
	echo "result: FINDING after ${elapsed}s (report above). Its input, to commit as a regression test:"
	for f in "$work/${pkg#./}/testdata/fuzz/$target"/*; do
		[ -f "$f" ] && echo "  ${pkg#./}/testdata/fuzz/$target/$(basename "$f"): $(tail -1 "$f")"
	done
	exit 0
fi
if [ "$status" -ne 0 ]; then
	echo "result: the campaign failed without a finding (exit $status)"
	exit "$status"
fi
echo "result: no finding in $duration"
