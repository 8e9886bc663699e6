#!/usr/bin/env bash
# Runs mnv on Citus (distributed PostgreSQL) where Citus is installed: a coordinator and two
# workers on this machine, the schema migrated and distributed by client from the tables'
# declared classes, and the end-to-end suite run against the coordinator.
# docs/operations.md#past-one-postgresql says when to use it and what each class means.
#
#   deploy/citus/citus.sh start   # clusters up, schema migrated and distributed; prints the URL
#   deploy/citus/citus.sh test    # start, then the e2e suite against the coordinator
#   deploy/citus/citus.sh stop    # stop the clusters (their folder stays until `clean`)
#   deploy/citus/citus.sh clean   # stop and remove them
#
# Ports (below 32768, out of the kernel's ephemeral range): MNV_CITUS_PORT (coordinator, default
# 9700) and the next two for the workers. State: $MNV_STATE_DIR/citus (default .mnv/citus).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${MNV_STATE_DIR:-$root/.mnv}/citus
base=${MNV_CITUS_PORT:-9700}
ports=("$base" "$((base + 1))" "$((base + 2))")
names=(coordinator worker1 worker2)
db=mnv
log() { echo "citus: $*" >&2; }

pgbin=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  [ -x "$d/initdb" ] && { pgbin=$d; break; }
done
[ -n "$pgbin" ] || { log "PostgreSQL is not installed (deploy/local/pg-ensure.sh installs it)"; exit 1; }
if [ ! -f "$("$pgbin/pg_config" --pkglibdir 2>/dev/null || echo /nonexistent)/citus.so" ] &&
   [ ! -f "$(dirname "$pgbin")/lib/citus.so" ]; then
  v=$(basename "$(dirname "$pgbin")")
  log "Citus is not installed for PostgreSQL $v: install the package postgresql-$v-citus-13.x"
  log "from Citus' own repository (https://github.com/citusdata/citus#install), or build it"
  log "from source, then run this again. Nothing was started."
  exit 2
fi
# Run as root, the clusters belong to postgres (initdb refuses root).
as_pg=()
[ "$(id -u)" -ne 0 ] || as_pg=(runuser -u postgres --)

url() { echo "postgres://postgres@127.0.0.1:${ports[$1]}/$db?sslmode=disable"; }
psql_at() { "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${ports[$1]}" -U postgres -d "${2:-$db}" "${@:3}"; }

start() {
  mkdir -p "$state"
  [ "$(id -u)" -ne 0 ] || chown postgres "$state"
  for i in 0 1 2; do
    dir=$state/${names[$i]}
    if [ ! -f "$dir/PG_VERSION" ]; then
      log "initdb ${names[$i]} (port ${ports[$i]})"
      "${as_pg[@]}" "$pgbin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 >/dev/null
      cat >>"$dir/postgresql.conf" <<CONF
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = ${ports[$i]}
unix_socket_directories = '$dir'
max_connections = 200
# The coordinator's two-phase commits across workers.
max_prepared_transactions = 200
CONF
    fi
    if ! "$pgbin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      "${as_pg[@]}" "$pgbin/pg_ctl" -D "$dir" -l "$dir/log" -w start >/dev/null
    fi
  done
  for i in 0 1 2; do
    psql_at "$i" postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
      psql_at "$i" postgres -c "CREATE DATABASE $db"
    psql_at "$i" "$db" -c "CREATE EXTENSION IF NOT EXISTS citus"
  done
  psql_at 0 "$db" -tAc "SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]})" >/dev/null
  for i in 1 2; do
    psql_at 0 "$db" -tAc "SELECT 1 FROM pg_dist_node WHERE nodeport = ${ports[$i]}" | grep -q 1 ||
      psql_at 0 "$db" -tAc "SELECT citus_add_node('127.0.0.1', ${ports[$i]})" >/dev/null
  done

  log "building and migrating"
  make -C "$root" --no-print-directory build >&2
  for s in accounts verification connect; do
    DATABASE_URL=$(url 0) "$root/bin/$s" migrate >/dev/null
  done
  # The statements come from the same declaration the catalog test holds the schema to
  # (mnvctl schema citus); a table already distributed is skipped.
  log "distributing the tables"
  "$root/bin/mnvctl" schema citus | while IFS= read -r stmt; do
    table=$(sed -E "s/^SELECT create_[a-z_]+_table\('([^']+)'.*/\1/" <<<"$stmt")
    if psql_at 0 "$db" -tAc "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = '$table'::regclass" | grep -q 1; then
      continue
    fi
    psql_at 0 "$db" -tAc "$stmt" >/dev/null
  done
  psql_at 0 "$db" -c "SELECT logicalrelid, partmethod, colocationid FROM pg_dist_partition ORDER BY 1" >&2
  url 0
}

stop() {
  for i in 2 1 0; do
    dir=$state/${names[$i]}
    [ -f "$dir/PG_VERSION" ] && "${as_pg[@]}" "$pgbin/pg_ctl" -D "$dir" -m fast stop >/dev/null 2>&1 || true
  done
}

case "${1:-}" in
  start) start ;;
  test)
    coordinator=$(start)
    # The suite uses the distributed database as it is (MNV_E2E_DATABASE_URL), instead of a new
    # database per suite, which the workers would not have.
    log "end-to-end suite against the coordinator"
    (cd "$root/tests" && MNV_E2E_DATABASE_URL=$coordinator MNV_BIN_DIR=$root/bin go test -count=1 -p 1 ./e2e "${@:2}")
    ;;
  stop) stop ;;
  clean) stop; rm -rf "$state" ;;
  *) echo "usage: $0 start|test|stop|clean" >&2; exit 2 ;;
esac
