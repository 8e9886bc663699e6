#!/usr/bin/env bash
# Prints the URL of a PostgreSQL server that mnv may use, starting one if need be:
#   1. $DATABASE_URL, when set (used as it is);
#   2. else a local server on 127.0.0.1:5432 (user postgres, no password; MNV_PG_LOCAL_URL), if one answers;
#   3. else (or when MNV_PG_PRIVATE is set) a private throwaway cluster under .mnv/pg (port $MNV_PG_PORT, default 55432),
#      created on first use (PostgreSQL installed with apt-get when missing) and started, by pg-private.sh.
# With --database NAME, the database NAME is created when missing and its URL printed instead of
# the server's. Everything else goes to stderr, so `url=$(pg-ensure.sh)` just works.
set -euo pipefail

db=""
if [ "${1:-}" = "--database" ]; then db=${2:?--database needs a name}; fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${MNV_STATE_DIR:-$root/.mnv}
port=${MNV_PG_PORT:-55432}
log() { echo "pg-ensure: $*" >&2; }

if [ -n "${DATABASE_URL:-}" ]; then
  echo "$DATABASE_URL"
  exit 0
fi

here="$root/deploy/local"
pgbin=$("$here/pg-private.sh" bin)
export PATH="$pgbin:$PATH"

with_db() { # url dbname -> url of that database on the same server
  echo "$1" | sed -E 's#^([a-z]+://[^/?]*)(/[^?]*)?#\1/'"$2"'#'
}

finish() { # server url
  local url=$1
  if [ -n "$db" ]; then
    if [ "$(psql "$url" -qtAX -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" != "1" ]; then
      psql "$url" -qtAX -c "CREATE DATABASE \"$db\"" >/dev/null 2>&1 ||
        [ "$(psql "$url" -qtAX -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" = "1" ]
    fi
    url=$(with_db "$url" "$db")
  fi
  echo "$url"
  exit 0
}

# MNV_PG_LOCAL_URL stands in for the local server (deploy/local/pg-budget-check.sh's, a server
# that is shared and short of connections).
local_url=${MNV_PG_LOCAL_URL:-"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"}
if [ -z "${MNV_PG_PRIVATE:-}" ] && pg_isready -q -d "$local_url" -t 2 && psql "$local_url" -qtAX -c 'SELECT 1' >/dev/null 2>&1; then
  finish "$local_url"
fi

# A private cluster. Serialise concurrent callers (parallel test packages) on a lock.
mkdir -p "$state"
exec 9>"$state/pg.lock"
flock 9
# pg-private.sh creates it on first use and starts it when it is not running. The lock stays here:
# the postmaster must not inherit it, or no later caller would get it.
url=$("$here/pg-private.sh" start "$state/pg" "$port" -c max_connections=300 9>&-)
finish "$url"
