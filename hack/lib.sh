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
