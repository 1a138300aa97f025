#!/usr/bin/env bash
# loaded.sh HOGS COMMAND...: runs COMMAND while HOGS busy loops (one per
# core, say) keep the CPU saturated, and stops them however COMMAND ends:
# a loaded machine must not turn a healthy controller into a finding.
set -uo pipefail
hogs=${1:?number of busy loops}; shift
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; }
trap stop EXIT
for _ in $(seq 1 "$hogs"); do
	sh -c 'while :; do :; done' &
	pids+=($!)
done
echo "loaded: $hogs busy loops on $(nproc) cores while: $*"
"$@"
