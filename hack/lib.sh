# lib.sh: helpers shared by the fuzz scripts. Sourced, not run.

# build_fuzz_binary TARGET PKG OUT: builds PKG's coverage-instrumented test
# binary for TARGET (go test -c -fuzz) from the working tree into OUT. Go's
# build cache keys a package on its directory too, so building in place (not
# in a copy) lets every campaign after the first link nothing.
build_fuzz_binary() {
	local target=$1 pkg=$2 out=$3
	(cd "$(git rev-parse --show-toplevel)" && go test -c -fuzz="^${target}\$" -o "$out" "$pkg")
}

# run_campaign BIN TARGET DIR DURATION WORKERS: runs the built binary's
# campaign with DIR as its working directory: DIR has no testdata, so the
# campaign starts from an empty corpus (the scenario's and derived seeds
# only), and a finding's input is written to DIR/testdata/fuzz/TARGET. Its
# fuzz cache is DIR/.fuzzcache: the user's go test fuzz cache is left alone.
# Minimization is capped at 10 executions per input: go test would minimize
# every new interesting input for 60 s, and an execution takes up to a few
# seconds.
run_campaign() {
	local bin=$1 target=$2 dir=$3 duration=$4 workers=$5
	(cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$duration" -test.fuzzminimizetime=10x \
		-test.parallel="$workers" -test.fuzzcachedir="$dir/.fuzzcache")
}

# executions DIR: every execution the campaign's workers ran, from their stats
# files in the campaign directory DIR (fuzz.Stats reads the same): the one
# count of a campaign, the corpus replay and minimization included, which go
# test's own "execs" leave out.
executions() {
	cat "$1"/stats-*.log 2>/dev/null | grep -oE ': [0-9]+ executions' | grep -oE '[0-9]+' | awk '{n += $1} END {print n + 0}'
}

# progress DIR: copies go test's fuzzing output, with the execution count of
# each progress line replaced by the workers' own (executions DIR), so that a
# campaign shows one count everywhere.
progress() {
	local dir=$1 line
	while IFS= read -r line; do
		if [[ $line =~ ^(fuzz:\ elapsed:\ [0-9hms.]+),\ execs:\ [0-9]+\ \([0-9]+/sec\)(.*)$ ]]; then
			line="${BASH_REMATCH[1]}, executions: $(executions "$dir")${BASH_REMATCH[2]}"
		fi
		printf '%s\n' "$line"
	done
}

# outcome LOG STATUS: what a campaign's output LOG and exit STATUS say, one
# word: "finding" when a worker reported one (only a finding prints the
# command that keeps it), "harness" when the campaign failed without one (a
# worker that could not start, a harness error in a regression run, a crash
# of go test's fuzzing), "none" when it ended cleanly at its time limit.
outcome() {
	if grep -q 'keep it as a regression row: ' "$1"; then
		echo finding
	elif [ "$2" -ne 0 ]; then
		echo harness
	else
		echo none
	fi
}
