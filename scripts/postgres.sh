#!/usr/bin/env bash
# Starts (or finds running) a throwaway PostgreSQL cluster for the tests and prints its URL
# on stdout; everything else goes to stderr. Idempotent: a second call finds the cluster
# running and prints the same URL.
#
#   export GATEHOUSE_TEST_POSTGRES_URL="$(scripts/postgres.sh)"
#
# The cluster lives in a fixed directory under /tmp, listens on 127.0.0.1 only, on a fixed
# non-default port, with password (SCRAM) authentication for one superuser. The server
# refuses to run as root, so under root (CI) it runs as the `postgres` user that Debian's
# package creates. Durability is off (fsync, synchronous_commit): nothing here is kept.
# `scripts/postgres.sh stop` stops it.
#
# `scripts/postgres.sh durable [stop]` is a second cluster (127.0.0.1:55440) with fsync and
# synchronous commits on, as a production server runs: the benchmark measures against it.
set -euo pipefail

PORT="${GATEHOUSE_TEST_POSTGRES_PORT:-55439}"
BASE="/tmp/gatehouse-test-postgres"
DURABLE=0
if [ "${1:-}" = "durable" ]; then
  shift
  DURABLE=1
  PORT=55440
  BASE="/tmp/gatehouse-bench-postgres"
fi
DATA="$BASE/data"
SOCK="$BASE/sock"
LOG="$BASE/server.log"
USER_NAME="gatehouse"
PASSWORD="gatehouse-test-password"
URL="postgres://$USER_NAME:$PASSWORD@127.0.0.1:$PORT/postgres"

log() { echo "postgres.sh: $*" >&2; }

# The newest server binaries Debian's `postgresql` package installed.
bindir=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
  [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && bindir="$d"
done
if [ -z "$bindir" ]; then
  log "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin; run scripts/setup.sh (installs Debian's postgresql)"
  exit 1
fi

# Run as `postgres` when we are root (the server refuses root), else as ourselves.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_ctl_status() { as_owner "$bindir/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

if [ "${1:-}" = "stop" ]; then
  if pg_ctl_status; then
    as_owner "$bindir/pg_ctl" -D "$DATA" -m fast -w stop >&2
  fi
  exit 0
fi

init_cluster() {
  rm -rf "$BASE"
  mkdir -p "$DATA" "$SOCK"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres:postgres "$BASE"
  fi
  chmod 700 "$DATA"
  local pwfile="$BASE/pwfile"
  printf '%s\n' "$PASSWORD" >"$pwfile"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$pwfile"
  log "initdb in $DATA ($bindir)"
  as_owner "$bindir/initdb" -D "$DATA" -U "$USER_NAME" --pwfile="$pwfile" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$BASE/initdb.log" 2>&1 \
    || { cat "$BASE/initdb.log" >&2; exit 1; }
  rm -f "$pwfile"
  cat >>"$DATA/postgresql.conf" <<EOF
# gatehouse tests: throwaway, loopback only
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCK'
max_connections = 400
EOF
  if [ "$DURABLE" -eq 0 ]; then
    printf 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n' >>"$DATA/postgresql.conf"
  fi
}

start_cluster() {
  as_owner "$bindir/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >&2
}

if pg_ctl_status; then
  log "running on 127.0.0.1:$PORT ($DATA)"
else
  if [ ! -f "$DATA/PG_VERSION" ]; then
    init_cluster
  fi
  if ! start_cluster; then
    # A half-made or foreign cluster: start once more from scratch.
    log "start failed (see $LOG); initialising again"
    tail -n 20 "$LOG" >&2 || true
    init_cluster
    start_cluster
  fi
  log "started on 127.0.0.1:$PORT ($DATA)"
fi

# The server answers before we hand the URL out.
for _ in $(seq 1 100); do
  if PGPASSWORD="$PASSWORD" psql -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -qAtc 'SELECT 1' >/dev/null 2>&1; then
    echo "$URL"
    exit 0
  fi
  sleep 0.1
done
log "the server on 127.0.0.1:$PORT does not answer; see $LOG"
exit 1
