#!/usr/bin/env bash
# false-alarms-targets.sh [N]: each committed target file judged under
# ordinary latency only (stalefuzz false-alarms --count N, default 200),
# one after another, then the node lifecycle scenario per gate value and the
# node zones scenario (Go scenarios: their package's TestFalseAlarms). Each target's output, with
# every race and false alarm, its files and the command that replays it, is
# in FALSE_ALARMS_OUT (default $TMPDIR/stalefuzz-false-alarms), and a table
# of the results is printed at the end. Exit 1 when any target raised a
# race or a false alarm.
#
# FALSE_ALARMS_ANSWERS="lose slow reject-500 reset" measures, after that,
# each of those faults on answers the same way (stalefuzz false-alarms
# --answer), N executions per fault and target, on a copy of each target
# file in the composed space written beside it (so that its paths resolve)
# and removed afterwards. FALSE_ALARMS_TARGETS="kuberay keda ..." (their
# folders under scenarios/, or target files) measures those targets only;
# FALSE_ALARMS_ANSWERS_ONLY=1 leaves out the latency-only pass and the node
# lifecycle scenario (only the faults on answers).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
n=${1:-200}
out=${FALSE_ALARMS_OUT:-${TMPDIR:-/tmp}/stalefuzz-false-alarms}
mkdir -p "$out"
bin=$out/stalefuzz
go build -o "$bin" ./proxy/cmd/stalefuzz || exit 2
targets=(scenarios/pymirror/target.yaml scenarios/contention/target.yaml scenarios/kuberay/target.yaml
	scenarios/fluxcd/target.yaml scenarios/kro/target.yaml scenarios/argorollouts/target.yaml
	scenarios/certmanager/target.yaml scenarios/prometheusoperator/target.yaml scenarios/keda/target.yaml
	scenarios/kcm/targets/job-gate-off.yaml scenarios/kcm/targets/job-gate-on.yaml scenarios/kcm/targets/deployment-scheduled.yaml
	scenarios/kcm/targets/job-backoff.yaml scenarios/argorollouts/targets/workflows.yaml
	scenarios/argorollouts/targets/experiment.yaml scenarios/prometheusoperator/targets/bindings.yaml
	scenarios/argorollouts/targets/deadline.yaml scenarios/kcm/targets/job-pod-fates.yaml
	scenarios/kcm/targets/node-steps.yaml)
if [ -n "${FALSE_ALARMS_TARGETS:-}" ]; then
	targets=()
	for t in $FALSE_ALARMS_TARGETS; do
		case $t in *.yaml) ;; *) t=scenarios/$t/target.yaml ;; esac
		[ -f "$t" ] || { echo "false-alarms-targets: $t: no such target file (FALSE_ALARMS_TARGETS takes folders under scenarios/ or target files)" >&2; exit 2; }
		targets+=("$t")
	done
fi
only=${FALSE_ALARMS_ANSWERS_ONLY:-}
status=0
summary=()
[ -z "$only" ] && for t in "${targets[@]}"; do
	name=$(echo "$t" | sed 's|scenarios/||; s|/target.yaml||; s|/targets/|-|; s|\.yaml$||')
	echo "false-alarms: $t ($n executions); its output: $out/$name.out"
	start=$SECONDS
	STALEFUZZ_SRC=$PWD "$bin" false-alarms "$t" --count "$n" --findings "$out/$name" >"$out/$name.out" 2>"$out/$name.err"
	s=$?
	[ $s -ne 0 ] && status=1
	summary+=("$name (exit $s, $((SECONDS - start)) s): $(grep '^result' "$out/$name.out" | sed 's/^result: [^:]*: //')")
done
copies=()
trap 'rm -f "${copies[@]}"' EXIT
for a in ${FALSE_ALARMS_ANSWERS:-}; do
	for t in "${targets[@]}"; do
		name=$(echo "$t" | sed 's|scenarios/||; s|/target.yaml||; s|/targets/|-|; s|\.yaml$||')-$a
		c=$(dirname "$t")/.stalefuzz-composed-$(basename "$t")
		copies+=("$c")
		if grep -q '^  space:' "$t"; then
			sed 's/^  space: .*/  space: composed/' "$t" >"$c"
		elif grep -q '^faults:' "$t"; then
			sed 's/^faults:.*/faults:\n  space: composed/' "$t" >"$c"
		else
			{ cat "$t"; printf 'faults:\n  space: composed\n'; } >"$c"
		fi
		echo "false-alarms: $t with a $a answer ($n executions); its output: $out/$name.out"
		start=$SECONDS
		STALEFUZZ_SRC=$PWD "$bin" false-alarms "$c" --answer "$a" --count "$n" --findings "$out/$name" >"$out/$name.out" 2>"$out/$name.err"
		s=$?
		[ $s -ne 0 ] && status=1
		summary+=("$name (exit $s, $((SECONDS - start)) s): $(grep '^result' "$out/$name.out" | sed 's/^result: [^:]*: //')")
		rm -f "$c"
	done
done
if [ -z "$only" ] && [ -z "${FALSE_ALARMS_TARGETS:-}" ]; then
	echo "false-alarms: the node lifecycle scenario, gate off and on"
	STALEFUZZ_FALSE_ALARMS=$n go test -count=1 -run='^TestFalseAlarmsNodeLifecycle' -v -timeout=5h ./scenarios/kcm/ >"$out/nodelifecycle.out" 2>&1 || status=1
	summary+=("nodelifecycle: $(grep -E 'false alarms of the node lifecycle' "$out/nodelifecycle.out" | sed 's/^ *//')")
	echo "false-alarms: the node zones scenario"
	STALEFUZZ_FALSE_ALARMS=$n go test -count=1 -run='^TestFalseAlarmsNodeZones$' -v -timeout=5h ./scenarios/kcm/ >"$out/nodezones.out" 2>&1 || status=1
	summary+=("nodezones: $(grep -E 'false alarms of the node zones' "$out/nodezones.out" | sed 's/^ *//')")
fi
echo
for l in "${summary[@]}"; do echo "$l"; echo; done
exit $status
