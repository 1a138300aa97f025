#!/usr/bin/env bash
# deps.sh installs the system packages the tests need on a fresh machine:
# git (the FluxCD scenario's git server is git http-backend) and chromium
# (proxy/report's test opens the timeline page in headless Chromium;
# hack/screenshot.sh draws it into a PNG). Debian package names; run as root
# or with sudo. Idempotent.
set -euo pipefail
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}"
