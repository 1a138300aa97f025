#!/usr/bin/env bash
# trace-memory.sh [DURATION]: the standalone proxy's memory over DURATION
# (default 30m) at 100 watch events a second. Two `stalefuzz proxy` commands
# run in front of one envtest apiserver, one writing its trace as it grows
# (the default) and one keeping it in memory (--trace-in-memory), each with
# one informer on 100 ConfigMaps updated 100 times a second; every minute it
# prints each proxy's RSS and live Go heap (GODEBUG=gctrace=1), the events
# its informer got and the size of the trace file (TestTraceMemory in
# proxy/cmd/stalefuzz).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration=${1:-30m}
STALEFUZZ_TRACE_MEMORY=$duration go test -count=1 -run='^TestTraceMemory$' -v -timeout=2h ./proxy/cmd/stalefuzz/ |
	sed -unE 's/^ +[a-z_]+_test\.go:[0-9]+: //p; /^(--- |ok|FAIL|panic)/p'
