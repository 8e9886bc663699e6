#!/usr/bin/env bash
# Prints the path of a Chromium that the browser tests (tests/browser) may drive, installing one if need be:
#   1. $MNV_CHROMIUM, when set (used as it is; it must be executable);
#   2. else chromium or chromium-browser on PATH (or /usr/bin/chromium);
#   3. else Debian's chromium package, installed with apt-get (sudo when not root).
# Everything else goes to stderr, so `MNV_CHROMIUM=$(chromium-ensure.sh)` just works.
set -euo pipefail

log() { echo "chromium-ensure: $*" >&2; }

if [ -n "${MNV_CHROMIUM:-}" ]; then
  [ -x "$MNV_CHROMIUM" ] || { log "MNV_CHROMIUM=$MNV_CHROMIUM is not an executable"; exit 1; }
  echo "$MNV_CHROMIUM"
  exit 0
fi

find_chromium() {
  local c
  for c in /usr/bin/chromium chromium chromium-browser; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}

if path=$(find_chromium); then
  echo "$path"
  exit 0
fi

# Serialise concurrent callers: two apt-get runs fight over the dpkg lock.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${MNV_STATE_DIR:-$root/.mnv}
mkdir -p "$state"
exec 9>"$state/chromium.lock"
flock 9
if path=$(find_chromium); then
  echo "$path"
  exit 0
fi

log "Chromium is not installed; installing Debian's chromium package with apt-get (about 100 MB)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >&2
path=$(find_chromium) || { log "the chromium install failed"; exit 1; }
echo "$path"
