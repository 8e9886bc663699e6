#!/usr/bin/env bash
# CI check: the tests on a new user's machine, whose default PostgreSQL (max_connections=100) is
# shared with another application. It starts a throwaway cluster of its own like that (never
# the machine's server), holds HELD (default 20) connections open from another process, lets
# pg-test-budget.sh choose, runs a slice of the suite (the services' store tests and an
# end-to-end package on the real binaries of bin/) as make test would on a machine of
# MNV_TEST_CPUS (default 8) CPUs, and fails on any "too many clients". Then, with the server
# nearly full, the budget must choose a private cluster. Prints the peak of connections seen.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
held=${HELD:-20}
port=${MNV_PG_CHECK_PORT:-55441}
export MNV_TEST_CPUS=${MNV_TEST_CPUS:-8}
work=$(mktemp -d /tmp/mnv-pg-budget-check.XXXXXX)
log() { echo "pg-budget-check: $*" >&2; }

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/initdb" ] || { log "PostgreSQL is not installed"; exit 1; }
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
  as_owner=(runuser -u postgres --)
fi
data="$work/shared"
holders=() # processes to end: the connection holders, the sampler
held_now=0
cleanup() {
  for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
  "${as_owner[@]}" "$pgbin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
  [ ! -f "$work/state/pg/data/PG_VERSION" ] || "${as_owner[@]}" "$pgbin/pg_ctl" -D "$work/state/pg/data" stop -m immediate >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The "shared" server: PostgreSQL's default max_connections, on a port of its own.
mkdir -p "$data" "$work/run"
[ ${#as_owner[@]} -eq 0 ] || chown -R postgres "$work"
"${as_owner[@]}" "$pgbin/initdb" -D "$data" -U postgres --auth=trust --no-instructions >"$work/initdb.log" 2>&1
"${as_owner[@]}" "$pgbin/pg_ctl" -D "$data" -l "$work/server.log" -w -t 30 \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$work/run -c max_connections=100 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
  start >/dev/null
shared="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

count() { psql "$shared" -qtAX -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"; }
hold() { # n: open n more connections from other processes, kept until the end
  local i
  for ((i = 0; i < $1; i++)); do
    psql "$shared" -qtAX -c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
    holders+=($!)
  done
  held_now=$((held_now + $1))
  local want=$held_now
  for ((i = 0; i < 100; i++)); do
    [ "$(count)" -gt "$want" ] && return 0 # the held ones, and count's own
    sleep 0.1
  done
  log "could not hold $want connections"; exit 1
}
hold "$held"
log "server 127.0.0.1:$port: max_connections=100, $held held by another process"

# As make test on a machine of MNV_TEST_CPUS CPUs, with this server as the local one.
budget_env=(env -u DATABASE_URL MNV_PG_LOCAL_URL="$shared" MNV_STATE_DIR="$work/state" MNV_PG_PORT=$((port + 1)))
read -r url packages < <("${budget_env[@]}" deploy/local/pg-test-budget.sh)
[ "$url" = "$shared" ] || { log "FAIL: the budget left a server with room: $url"; exit 1; }

peak="$work/peak"
echo 0 >"$peak"
( while sleep 0.2; do n=$(count 2>/dev/null) || continue; [ "$n" -le "$(cat "$peak")" ] || echo "$n" >"$peak"; done ) &
sampler=$!
holders+=("$sampler")
out="$work/test.log"
status=0
# Packages at once, as make test runs a module's: the services' stores; then end-to-end tests
# on the real binaries (three services and the gateway, each with its pools).
slice=(./services/accounts/internal/store/... ./services/verification/internal/store/... ./services/connect/internal/store/...)
export DATABASE_URL="$url" MNV_BIN_DIR="$root/bin"
go test -count=1 -p "$packages" "${slice[@]}" >>"$out" 2>&1 || status=$?
go test -count=1 -p "$packages" -run 'TestOperatorAndClient|TestBootstrapAndRotation|TestForeignIDsAreNotFound' ./tests/e2e/ >>"$out" 2>&1 || status=$?
unset DATABASE_URL
kill "$sampler" 2>/dev/null || true
log "slice ran $packages package(s) at a time; peak $(cat "$peak") client connections of 100 (held: $held)"
if grep -q "too many clients" "$out"; then
  grep -c "too many clients" "$out" | xargs -I{} echo "pg-budget-check: FAIL: {} lines of \"too many clients\"" >&2
  tail -40 "$out" >&2
  exit 1
fi
# The budget's figure per package must cover what the packages took.
per=${MNV_TEST_PG_CONNS_PER_PACKAGE:-30}
if [ $(($(cat "$peak") - held - 1)) -gt $((packages * per)) ]; then
  log "FAIL: $packages package(s) took $(($(cat "$peak") - held - 1)) connections, more than the budget's $per each"; exit 1
fi
if [ "$status" -ne 0 ]; then
  log "FAIL: the slice failed"; tail -60 "$out" >&2; exit 1
fi

# Nearly full: no package fits, so the budget takes a private cluster, and says so.
hold $((100 - 3 - held - 20))
read -r url packages < <("${budget_env[@]}" deploy/local/pg-test-budget.sh 2>"$work/budget.err")
cat "$work/budget.err" >&2
if [ "$url" = "$shared" ] || ! grep -q "private cluster" "$work/budget.err"; then
  log "FAIL: with the server nearly full the budget kept it: $url"; exit 1
fi
psql "$url" -qtAX -c 'SELECT 1' >/dev/null
log "ok"
