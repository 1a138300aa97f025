#!/usr/bin/env bash
# picture.sh [PNG]: replays the committed finding the README shows
# (FuzzContentionRealisticBlind/fb833c03b460be29, the lost plan after a relist
# on 410 Gone) against the real apiserver, checks its picture the way a person
# would see it, in headless Chromium (the page loads, logs no error, and has
# the replica's lane, the step's band, held and broken events, blind writes
# and the violations), and renders it into PNG (default
# scenarios/contention/finding.png).
set -euo pipefail
top=$(git rev-parse --show-toplevel)
png=$(realpath -m "${1:-$top/scenarios/contention/finding.png}")
entry=fb833c03b460be29
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stalefuzz-picture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "picture: replaying FuzzContentionRealisticBlind/$entry" >&2
(cd "$top" && STALEFUZZ_FINDINGS=$tmp/findings go test -count=1 -run="^FuzzContentionRealisticBlind\$/$entry\$" ./scenarios/contention/ >"$tmp/test.log" 2>&1) || {
	cat "$tmp/test.log" >&2
	exit 1
}
html=$(ls "$tmp"/findings/*.html)
base=${TMPDIR:-/tmp}
[ ${#base} -le 40 ] || base=/tmp
prof=$(mktemp -d "$base/stalefuzz-chromium.XXXXXX")
trap 'rm -rf "$tmp" "$prof"' EXIT
HOME=$prof XDG_CONFIG_HOME=$prof/.config XDG_CACHE_HOME=$prof/.cache TMPDIR=$prof \
	timeout --foreground --kill-after=5 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
	--user-data-dir="$prof/profile" --crash-dumps-dir="$prof/crashes" --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --disable-extensions \
	--enable-logging=stderr --v=0 --dump-dom "file://$html" >"$tmp/dom.html" 2>"$tmp/chromium.log"
fail=0
if grep -E 'CONSOLE|Uncaught|Refused' "$tmp/chromium.log" >&2; then
	echo "picture: the page logged errors in Chromium" >&2
	fail=1
fi
for want in '<g class="lane"[^>]*data-client="replica-0"' '<g class="band"[^>]*data-client="replica-0"' '<g class="event held"' \
	'<g class="event broken"' '<g class="write ok blind"[^>]*data-verb="patch"' '<g class="violation" data-oracle="lost-update"' \
	'<g class="violation" data-oracle="plan-kept"'; do
	if ! grep -qE "$want" "$tmp/dom.html"; then
		echo "picture: Chromium's DOM lacks $want" >&2
		fail=1
	fi
done
[ $fail -eq 0 ] || exit 1
echo "picture: Chromium loaded the page without errors; lanes, band, held and broken events, blind writes and both violations present" >&2
"$top/hack/screenshot.sh" "$html" "$png" 1400,1000 >/dev/null
echo "$png"
