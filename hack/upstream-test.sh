#!/usr/bin/env bash
# upstream-test.sh [--patch FILE]... [--expect fail|pass] [--published VERSION] MODULE@VERSION PACKAGE TESTFILE [GO TEST ARGS...]
#
# Runs a finding's test, written in the upstream project's own style, inside
# a copy of that project's module at the release it was found in: TESTFILE
# is copied into PACKAGE (a directory of the module), each --patch FILE (a
# unified diff, paths relative to the module's root: patch -p1) is applied
# to the copy, and `go test` runs there with the remaining arguments (say
# -run NAME -v). Nothing of the module cache is changed; the copy is removed
# however the script ends.
#
# A module zip leaves nested modules out, so a replace onto a directory the
# copy does not hold is dropped. With --published VERSION it becomes a
# replace onto that published version of the same module instead: what
# k8s.io/kubernetes needs, whose go.mod requires its staging modules at
# v0.0.0 and replaces them with ./staging paths (k8s.io/kubernetes v1.37.1's
# are published as v0.37.1).
#
# Exit status: without --expect, go test's (a test that shows a bug fails at
# the release). With --expect fail, 0 when the test ran and failed, 1 when
# it passed; with --expect pass, the reverse. A copy that does not build, or
# a patch that does not apply, is 2 either way: never taken for the
# expected failure.
#
#   hack/upstream-test.sh --expect fail github.com/ray-project/kuberay/ray-operator@v1.6.2 \
#     controllers/ray scenarios/kuberay/testdata/upstream/raycluster_lost_head_create_test.go \
#     -run TestReconcile_HeadPodCreateAnswerLost -v
set -uo pipefail
patches=() expect= published=
while [ $# -gt 0 ]; do
  case $1 in
    --patch) patches+=("$(cd "$(dirname "${2:?--patch FILE}")" && pwd)/$(basename "$2")"); shift 2 ;;
    --expect) expect=${2:?--expect fail|pass}; shift 2 ;;
    --published) published=${2:?--published VERSION}; shift 2 ;;
    --) shift; break ;;
    -*) echo "upstream-test: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
case $expect in ''|fail|pass) ;; *) echo "upstream-test: --expect $expect: want fail or pass" >&2; exit 2 ;; esac
mod=${1:?MODULE@VERSION}; pkg=${2:?PACKAGE}; file=${3:?TESTFILE}; shift 3
[ -f "$file" ] || { echo "upstream-test: no test file $file" >&2; exit 2; }
for p in "${patches[@]}"; do [ -f "$p" ] || { echo "upstream-test: no patch file $p" >&2; exit 2; }; done
file=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
dir=$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "upstream-test: unable to download $mod (go mod download -json $mod)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/stalefuzz-upstream-XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$dir/." "$work/" && chmod -R u+w "$work"
[ -d "$work/$pkg" ] || { echo "upstream-test: $mod has no directory $pkg" >&2; exit 2; }
cp "$file" "$work/$pkg/"
for p in "${patches[@]}"; do
  echo "upstream-test: applying $p"
  (cd "$work" && patch -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch -r - -i "$p") || { echo "upstream-test: patch $p does not apply to $mod" >&2; exit 2; }
done
# A module zip leaves nested modules out: a replace onto a directory the
# copy does not hold is dropped, so the go.mod's own requirement applies
# (as fuzz/target's build does: dropMissingReplaces), or, with --published,
# points at that published version.
(cd "$work" && go mod edit -json | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]["Path"]
    if new.startswith("./") or new.startswith("../"):
        print(r["Old"]["Path"] + (("@" + r["Old"]["Version"]) if r["Old"].get("Version") else "") + "\t" + new)
' | while IFS=$'\t' read -r old new; do
  [ -d "$new" ] && continue
  if [ -n "$published" ]; then
    echo "upstream-test: replace $old => $new (not in the module zip) becomes ${old%@*} $published"
    go mod edit -replace="$old=${old%@*}@$published"
  else
    echo "upstream-test: dropping replace $old => $new (not in the module zip)"; go mod edit -dropreplace="$old"
  fi
done)
echo "upstream-test: $mod, package ./$pkg, with $(basename "$file")${patches:+ and ${#patches[@]} patch(es)}${expect:+, expecting the test to $expect}"
cd "$work" || exit 2
out=$(mktemp)
GOWORK=off GOFLAGS=-mod=mod go test -count=1 "./$pkg/" "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
ran=yes
grep -Eq '\[(build|setup) failed\]|^# |\[no tests to run\]|^testing: warning: no tests to run' "$out" && ran=no
rm -f "$out"
[ -z "$expect" ] && exit "$status"
if [ $ran = no ]; then echo "upstream-test: the test did not build, or -run matched none: neither pass nor fail" >&2; exit 2; fi
case $expect/$status in
  fail/0) echo "upstream-test: FAIL: expected the test to fail (the bug, at the release), and it passed"; exit 1 ;;
  fail/*) echo "upstream-test: ok: the test fails, as expected"; exit 0 ;;
  pass/0) echo "upstream-test: ok: the test passes, as expected"; exit 0 ;;
  pass/*) echo "upstream-test: FAIL: expected the test to pass (with the fix), and it failed"; exit 1 ;;
esac
