#!/usr/bin/env bash
# Prints the URL of a Redis server that mnv's tests may use, starting one if need be:
#   1. $MNV_TEST_REDIS_URL, else $MNV_REDIS_URL, when set (used as it is);
#   2. else a local server on 127.0.0.1:6379, if one answers PING;
#   3. else (or when MNV_REDIS_PRIVATE is set) a private throwaway redis-server under .mnv/redis,
#      without persistence, on a free port from $MNV_REDIS_PORT (default 56379) up, started on
#      first use (Debian's redis-server installed with apt-get when missing) and reused after.
#      `make redis-stop` stops it.
# Everything else goes to stderr, so `url=$(redis-ensure.sh)` just works.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${MNV_STATE_DIR:-$root/.mnv}
log() { echo "redis-ensure: $*" >&2; }

if [ -n "${MNV_TEST_REDIS_URL:-}" ]; then
  echo "$MNV_TEST_REDIS_URL"
  exit 0
fi
if [ -n "${MNV_REDIS_URL:-}" ]; then
  echo "$MNV_REDIS_URL"
  exit 0
fi

# answers PORT: true when a Redis on 127.0.0.1:PORT answers PING (bash's /dev/tcp, so that
# redis-cli is not needed).
answers() {
  local reply=""
  { exec 8<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&8
  IFS= read -r -t 2 reply <&8 || true
  exec 8<&- 8>&-
  [ "${reply%$'\r'}" = "+PONG" ]
}

# in_use PORT: true when anything accepts connections on 127.0.0.1:PORT.
in_use() {
  (exec 8<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

if [ -z "${MNV_REDIS_PRIVATE:-}" ] && answers 6379; then
  echo "redis://127.0.0.1:6379/0"
  exit 0
fi

# A private server. Serialise concurrent callers (parallel test packages) on a lock.
dir="$state/redis"
mkdir -p "$dir"
exec 9>"$dir/redis.lock"
flock 9

if [ -f "$dir/port" ]; then
  port=$(cat "$dir/port")
  if answers "$port"; then
    echo "redis://127.0.0.1:$port/0"
    exit 0
  fi
fi

if ! command -v redis-server >/dev/null 2>&1; then
  log "redis-server is not installed; installing it with apt-get"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2
  # policy-rc.d-less containers would try to start the packaged service: harmless either way.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >&2
  command -v redis-server >/dev/null 2>&1 || { log "redis-server install failed"; exit 1; }
fi

port=${MNV_REDIS_PORT:-56379}
for _ in $(seq 1 50); do
  in_use "$port" || break
  port=$((port + 1))
done
in_use "$port" && { log "no free port from ${MNV_REDIS_PORT:-56379} on"; exit 1; }

log "starting a private redis-server on 127.0.0.1:$port (files in $dir)"
rm -f "$dir/redis.pid"
redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
  --save '' --appendonly no --dir "$dir" \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" </dev/null >&2 9>&- ||
  { log "redis-server did not start, see $dir/redis.log"; exit 1; }
for _ in $(seq 1 100); do
  if answers "$port"; then
    echo "$port" >"$dir/port"
    echo "redis://127.0.0.1:$port/0"
    exit 0
  fi
  sleep 0.1
done
log "redis-server did not answer on 127.0.0.1:$port, see $dir/redis.log"
exit 1
