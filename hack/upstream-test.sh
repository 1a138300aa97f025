#!/usr/bin/env bash
# upstream-test.sh MODULE@VERSION PACKAGE TESTFILE [GO TEST ARGS...]: runs a
# finding's test, written in the upstream project's own style, inside a
# copy of that project's module at the release it was found in: TESTFILE is
# copied into PACKAGE (a directory of the module) and `go test` runs there
# with the remaining arguments (say -run NAME -v). Nothing of the module
# cache is changed; the copy is removed however the script ends. Its exit
# status is go test's: a test that shows a bug fails at the release.
#
#   hack/upstream-test.sh github.com/ray-project/kuberay/ray-operator@v1.6.2 \
#     controllers/ray scenarios/kuberay/testdata/upstream/raycluster_lost_head_create_test.go \
#     -run TestReconcile_HeadPodCreateAnswerLost -v
set -uo pipefail
mod=${1:?MODULE@VERSION}; pkg=${2:?PACKAGE}; file=${3:?TESTFILE}; shift 3
[ -f "$file" ] || { echo "upstream-test: no test file $file" >&2; exit 2; }
file=$(cd "$(dirname "$file")" && pwd)/$(basename "$file")
dir=$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "upstream-test: unable to download $mod (go mod download -json $mod)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/stalefuzz-upstream-XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$dir/." "$work/" && chmod -R u+w "$work"
[ -d "$work/$pkg" ] || { echo "upstream-test: $mod has no directory $pkg" >&2; exit 2; }
cp "$file" "$work/$pkg/"
echo "upstream-test: $mod, package ./$pkg, with $(basename "$file")"
cd "$work" && GOWORK=off GOFLAGS=-mod=mod go test -count=1 "./$pkg/" "$@"
