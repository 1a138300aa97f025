#!/usr/bin/env bash
# screenshot.sh HTML PNG [WIDTH,HEIGHT]: renders a page written by proxy/report
# with headless Chromium into a PNG (the README picture). The window is
# WIDTH,HEIGHT CSS pixels (default 1400,900); the page is cut at its bottom.
# Chromium runs with a throw-away profile, no network services, and a budget
# of 60 s; nothing of it is left behind. `make deps` installs Chromium.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: hack/screenshot.sh HTML PNG [WIDTH,HEIGHT]" >&2
	exit 2
fi
html=$(realpath -e "$1")
png=$(realpath -m "$2")
size=${3:-1400,900}
if ! command -v chromium >/dev/null 2>&1; then
	echo "screenshot: chromium not found: run make deps (hack/deps.sh installs it)" >&2
	exit 1
fi
# Chromium makes a socket in a directory below TMPDIR, and a socket's path
# must fit in 107 bytes: under a long TMPDIR, use /tmp.
base=${TMPDIR:-/tmp}
[ ${#base} -le 40 ] || base=/tmp
tmp=$(mktemp -d "$base/stalefuzz-screenshot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/home"
rm -f "$png"
# --foreground keeps Chromium in this script's process group, so that
# whoever runs the script can end all of it.
if ! HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home/.config XDG_CACHE_HOME=$tmp/home/.cache TMPDIR=$tmp \
	timeout --foreground --kill-after=5 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
	--user-data-dir="$tmp/profile" --crash-dumps-dir="$tmp/crashes" \
	--no-first-run --no-default-browser-check --disable-background-networking \
	--disable-component-update --disable-sync --disable-extensions --hide-scrollbars \
	--window-size="$size" --screenshot="$png" "file://${html// /%20}" \
	>"$tmp/stdout" 2>"$tmp/stderr"; then
	echo "screenshot: chromium failed on $html:" >&2
	cat "$tmp/stderr" >&2
	exit 1
fi
if [ ! -s "$png" ]; then
	echo "screenshot: chromium wrote no $png:" >&2
	cat "$tmp/stderr" >&2
	exit 1
fi
echo "$png"
