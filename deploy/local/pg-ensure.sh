#!/usr/bin/env bash
# Prints the URL of a PostgreSQL server that mnv may use, starting one if need be:
#   1. $DATABASE_URL, when set (used as it is);
#   2. else a local server on 127.0.0.1:5432 (user postgres, no password; MNV_PG_LOCAL_URL), if one answers;
#   3. else (or when MNV_PG_PRIVATE is set) a private throwaway cluster under .mnv/pg (port $MNV_PG_PORT, default 55432),
#      created on first use (PostgreSQL installed with apt-get when missing) and started.
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

find_pgbin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

pgbin=$(find_pgbin || true)
if [ -z "$pgbin" ]; then
  log "PostgreSQL is not installed; installing it with apt-get"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
  pgbin=$(find_pgbin) || { log "PostgreSQL install failed"; exit 1; }
fi
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
data="$state/pg/data"
run="$state/pg/run"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  # initdb and postgres refuse to run as root: run them as the postgres user.
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
  as_owner=(runuser -u postgres --)
fi

if [ ! -f "$data/PG_VERSION" ]; then
  log "creating a private cluster in $data"
  mkdir -p "$data" "$run"
  [ ${#as_owner[@]} -eq 0 ] || chown -R postgres "$state/pg"
  chmod 700 "$data"
  "${as_owner[@]}" initdb -D "$data" -U postgres --auth=trust --encoding=UTF8 --no-instructions >"$state/pg/initdb.log" 2>&1 ||
    { log "initdb failed, see $state/pg/initdb.log"; exit 1; }
fi

if ! "${as_owner[@]}" pg_ctl -D "$data" status >/dev/null 2>&1; then
  log "starting the private cluster on 127.0.0.1:$port"
  mkdir -p "$run"
  [ ${#as_owner[@]} -eq 0 ] || chown postgres "$run"
  "${as_owner[@]}" pg_ctl -D "$data" -l "$state/pg/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$run -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start </dev/null >&2 9>&- || { log "start failed, see $state/pg/server.log"; exit 1; }
fi
finish "$url"
