#!/usr/bin/env bash
# Makes sure Node.js and npm are on PATH for the browser SDK (sdk/web: its build, tests and type
# check), installing Debian's nodejs and npm packages with apt-get (sudo when not root) when
# either is missing. Prints nothing on success; everything else goes to stderr.
set -euo pipefail

log() { echo "node-ensure: $*" >&2; }
have() { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }

have && exit 0

# Serialise concurrent callers: two apt-get runs fight over the dpkg lock.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${MNV_STATE_DIR:-$root/.mnv}
mkdir -p "$state"
exec 9>"$state/node.lock"
flock 9
have && exit 0

log "Node.js or npm is missing; installing Debian's nodejs and npm packages with apt-get"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >&2
have || { log "the Node.js install failed: install Node.js 18 or later and npm"; exit 1; }
