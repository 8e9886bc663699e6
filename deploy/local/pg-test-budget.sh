#!/usr/bin/env bash
# Decides where `make test` runs its databases and how many test packages run at once, so that
# the suite never asks a PostgreSQL server for more connections than it has free. Prints one
# line, "URL PACKAGES": the server's URL and the -p to give go test. Says on stderr which it chose.
#
# Each test package is counted as MNV_TEST_PG_CONNS_PER_PACKAGE connections (default 30: in
# deploy/local/pg-budget-check.sh, which CI runs and which fails when the figure is too small,
# two packages at once, store and end-to-end tests on the real binaries, took about 20). go test
# would otherwise run one package per CPU (-p): on 8 CPUs, more than a shared default server
# has. With the server of pg-ensure.sh (DATABASE_URL, else the local one):
#   - free = max_connections - the reserved ones - the client connections open now;
#   - packages = min(CPUs, free / per package); at least one: the suite runs there, narrower;
#   - none fits: a private cluster (pg-ensure.sh with MNV_PG_PRIVATE), whose connections are
#     the suite's own. An explicit DATABASE_URL is never replaced: the suite runs there, one
#     package at a time, with a warning.
# MNV_TEST_CPUS overrides the CPU count (CI uses it to act as a larger machine).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
per=${MNV_TEST_PG_CONNS_PER_PACKAGE:-30}
cpus=${MNV_TEST_CPUS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)}
log() { echo "pg-test-budget: $*" >&2; }

explicit=${DATABASE_URL:-}
url=$("$here/pg-ensure.sh")

# free connections of the server at $1, or nothing when it cannot be asked.
free_of() {
  psql "$1" -qtAX -F ' ' -c "SELECT current_setting('max_connections')::int,
      current_setting('superuser_reserved_connections')::int
        + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0),
      (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')" 2>/dev/null
}

decide() { # url -> sets max, free, packages
  local row
  row=$(free_of "$1") || return 1
  [ -n "$row" ] || return 1
  local reserved used
  read -r max reserved used <<<"$row"
  # This script's own psql is one of the clients counted; it is gone when the tests start.
  free=$((max - reserved - used + 1))
  packages=$((free / per))
  [ "$packages" -le "$cpus" ] || packages=$cpus
}

if ! decide "$url"; then
  log "cannot read the connection budget of the server; running one package at a time"
  echo "$url 1"
  exit 0
fi
where=${url%%\?*}
where=${where#*@}
if [ "$packages" -ge 1 ]; then
  log "server $where: $free of $max connections free; $packages test package(s) at a time, ~$per connections each"
  echo "$url $packages"
  exit 0
fi
if [ -n "$explicit" ]; then
  log "WARNING: DATABASE_URL's server $where has $free of $max connections free, fewer than one test package needs (~$per); running one package at a time there anyway (unset DATABASE_URL to use a private cluster)"
  echo "$url 1"
  exit 0
fi
log "server $where: $free of $max connections free, fewer than one test package needs (~$per): using a private cluster instead"
url=$(MNV_PG_PRIVATE=1 "$here/pg-ensure.sh")
where=${url%%\?*}
where=${where#*@}
if ! decide "$url" || [ "$packages" -lt 1 ]; then
  packages=1
fi
log "private cluster $where: $free of $max connections free; $packages test package(s) at a time"
echo "$url $packages"
