#!/usr/bin/env bash
# A private throwaway PostgreSQL cluster in a folder of its own: the one pg-ensure.sh falls back
# on, and the three of the end-to-end test that gives each service a server of its own
# (tests/harness, Options.ServerPerService). One copy of the initdb and start logic for both.
#
#   pg-private.sh bin
#       prints PostgreSQL's bin folder, installing PostgreSQL with apt-get when it is missing.
#   pg-private.sh start DIR PORT [--while PID] [-c NAME=VALUE]...
#       creates the cluster in DIR/data on first use, starts it (when it is not running) on
#       127.0.0.1:PORT, its socket in DIR/run and its log in DIR/server.log, and prints its URL.
#       Every -c is a server setting, after ours (so it wins). With --while PID, a watchdog
#       outside the caller's session stops the cluster and removes DIR once process PID is
#       gone: a test killed before its cleanup ran (a timeout's panic, a ^C) leaves no
#       postmaster behind.
#   pg-private.sh stop DIR [--remove]
#       stops the cluster at once (no shutdown checkpoint: it is throwaway); --remove deletes
#       DIR too.
#
# Durability is off (fsync, synchronous_commit, full_page_writes): a crash may lose the cluster,
# which nobody keeps. Only the URL goes to stdout, so `url=$(pg-private.sh start …)` works. As
# root, initdb and postgres run as the postgres user: they refuse to run as root.
set -euo pipefail

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
log() { echo "pg-private: $*" >&2; }
usage() {
  log "usage: pg-private.sh bin | start DIR PORT [--while PID] [-c NAME=VALUE]... | stop DIR [--remove]"
  exit 2
}

find_pgbin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

pgbin() {
  local bin
  if bin=$(find_pgbin); then
    echo "$bin"
    return 0
  fi
  log "PostgreSQL is not installed; installing it with apt-get"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
  find_pgbin || { log "PostgreSQL install failed"; return 1; }
}

as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  # Another caller may be adding the user at the same moment: then it exists all the same.
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres 2>/dev/null ||
    id postgres >/dev/null 2>&1
  as_owner=(runuser -u postgres --)
fi

stop() { # dir [--remove]
  local dir=$1
  if [ -f "$dir/data/postmaster.pid" ]; then
    "${as_owner[@]}" "$(pgbin)/pg_ctl" -D "$dir/data" stop -m immediate -w -t 30 >/dev/null 2>&1 ||
      log "could not stop the cluster in $dir/data"
  fi
  [ "${2:-}" != "--remove" ] || rm -rf "$dir"
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case "$cmd" in
bin)
  pgbin
  ;;

start)
  [ $# -ge 2 ] || usage
  dir=$1 port=$2
  shift 2
  owner=""
  settings=()
  while [ $# -gt 0 ]; do
    case "$1" in
    --while) owner=${2:?--while needs a process id}; shift 2 ;;
    -c) settings+=(-c "${2:?-c needs NAME=VALUE}"); shift 2 ;;
    *) usage ;;
    esac
  done
  bin=$(pgbin)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd) # the watchdog runs elsewhere
  data="$dir/data" run="$dir/run"
  if [ ! -f "$data/PG_VERSION" ]; then
    log "creating a private cluster in $data"
    mkdir -p "$data" "$run"
    [ ${#as_owner[@]} -eq 0 ] || chown -R postgres "$dir"
    chmod 700 "$data"
    "${as_owner[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --no-instructions >"$dir/initdb.log" 2>&1 ||
      { log "initdb failed:"; tail -n 20 "$dir/initdb.log" >&2; exit 1; }
  fi
  if [ -n "$owner" ]; then
    # Started before the server, so even a caller killed during the start leaves nothing.
    setsid "$self" watch "$dir" "$owner" </dev/null >/dev/null 2>&1 &
  fi
  if ! "${as_owner[@]}" "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    log "starting the private cluster in $data on 127.0.0.1:$port"
    mkdir -p "$run"
    [ ${#as_owner[@]} -eq 0 ] || chown postgres "$run"
    opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$run"
    opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off ${settings[*]}"
    # The server's own output goes to its log; a failed start shows the log's end, which says why
    # (a port taken, too little shared memory).
    "${as_owner[@]}" "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 -o "$opts" start </dev/null >&2 ||
      { log "start failed:"; tail -n 20 "$dir/server.log" >&2; exit 1; }
  fi
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ;;

stop)
  [ $# -ge 1 ] || usage
  stop "$@"
  ;;

watch) # dir pid: start --while's watchdog
  dir=$1 pid=$2
  while kill -0 "$pid" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
  [ ! -d "$dir" ] || stop "$dir" --remove
  ;;

*)
  usage
  ;;
esac
