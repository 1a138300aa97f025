#!/usr/bin/env bash
# test.sh: the packages' tests as make test runs them, one package at a time
# (-p 1: timing-sensitive specs share no CPU).
#
# The scenarios' packages need their controllers built from Go modules
# (Argo Rollouts, cert-manager, KEDA, KRO, KubeRay, prometheus-operator):
# on a fresh 2-core machine, minutes each, which a scenario's first test
# would spend alone. So while the packages of fuzz/ and proxy/ run (they wait
# on the apiserver and on timers: about half of 2 cores is idle), those
# controllers are built beside them at the lowest CPU priority (nice 19),
# into stalefuzz's binary cache and Go's build cache, one process group
# with `stalefuzz prepare --controllers-only` per target file. When fuzz/
# and proxy/ end, what is still building is stopped (a build stopped leaves
# no binary; Go's build cache keeps each package it compiled, and the build
# lock is released) and the scenarios' packages run, each building at
# normal priority what it still lacks. Prepare's build lock keeps a test
# from building a controller the background is building.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
GO=${GO:-go}
# The background builds need setsid (a process group of their own, stopped
# as one). Without it (macOS has none), each test builds what it needs.
command -v setsid >/dev/null || exec $GO test -count=1 -p 1 -timeout=30m ./...
work=$(mktemp -d "${TMPDIR:-/tmp}/stalefuzz-test.XXXXXX") || exit 1
bg=
stop() {
	[ -n "$bg" ] || return 0
	kill -TERM -- "-$bg" 2>/dev/null
	wait "$bg" 2>/dev/null
	bg=
}
trap 'stop; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! $GO build -o "$work/stalefuzz" ./proxy/cmd/stalefuzz; then
	echo "test.sh: unable to build the stalefuzz command" >&2
	exit 1
fi
# setsid: the builds are a process group of their own, stopped as one.
# setsid also starts a session, and where the kernel groups sessions for
# the scheduler (autogroup, on by default in most distributions: see
# sched(7)), nice counts only within a session's group, and the group
# competes with the tests' as an equal: so the builds' group is given nice
# 19 too (/proc/self/autogroup). Without that, on 2026-12-05, the builds
# took half of the CPU and proxy/cmd/stalefuzz ran 1121 s, not ~430 s.
setsid bash -c '
	{ echo 19 >/proc/self/autogroup; } 2>/dev/null
	for t in scenarios/*/target.yaml; do
		log=$1/build-$(basename "$(dirname "$t")").log
		nice -n 19 "$0" prepare --controllers-only "$t" >"$log" 2>&1 ||
			echo "test.sh: the background build of $t failed (its tests build it again): $(tail -n 1 "$log")"
	done' "$work/stalefuzz" "$work" >"$work/builds.log" 2>&1 &
bg=$!

status=0
$GO test -count=1 -p 1 -timeout=30m ./fuzz/... ./proxy/... || status=1
stop
built=$(cat "$work"/build-*.log 2>/dev/null | grep -c 'building controller')
echo "test.sh: beside fuzz/ and proxy/, at nice 19: $built controller build(s) begun, the rest cached; stopped what was still building:"
{ cat "$work"/build-*.log 2>/dev/null | grep 'building controller'; grep 'failed' "$work/builds.log"; } | sed 's/^/  /'
$GO test -count=1 -p 1 -timeout=30m ./scenarios/... || status=1
exit $status
