#!/usr/bin/env bash
# PgBouncer in transaction pooling mode in front of PostgreSQL: many gateways' statement pools
# share a few server connections (docs/operations.md, "Connections per process").
#   scripts/topology/pgbouncer.sh up|down|status
# Listens on 127.0.0.1:${SVC_PGBOUNCER_PORT:-26432}; every database name is passed through to
# the upstream, 127.0.0.1:5432 by default (SVC_PGBOUNCER_UPSTREAM_PORT=25000: the pg-ha
# topology's primary, through HAProxy). The admin console is the database `pgbouncer` on the
# same port (user postgres). Files under $SVC_TOPOLOGY_DIR (default /tmp/svc-topology)/pgbouncer;
# `down` stops what `up` started.
set -euo pipefail

DIR="${SVC_TOPOLOGY_DIR:-/tmp/svc-topology}/pgbouncer"
PORT="${SVC_PGBOUNCER_PORT:-26432}"
UPSTREAM_HOST="${SVC_PGBOUNCER_UPSTREAM_HOST:-127.0.0.1}"
UPSTREAM_PORT="${SVC_PGBOUNCER_UPSTREAM_PORT:-5432}"
# Server connections per database and user: what PostgreSQL sees, however many clients come.
POOL_SIZE="${SVC_PGBOUNCER_POOL_SIZE:-20}"
MAX_CLIENTS="${SVC_PGBOUNCER_MAX_CLIENTS:-2000}"
BIN="${PGBOUNCER_BIN:-$(command -v pgbouncer || echo /usr/sbin/pgbouncer)}"

# PgBouncer refuses to run as root: as root, it runs as the postgres user.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pidof_file() { [ -f "$1" ] && cat "$1" 2>/dev/null || true; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
# A pid file can outlive its process and pids wrap: a pid is ours only if its command line names our directory.
ours() { alive "${1:-}" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$DIR"; }

config() {
  cat <<INI
[databases]
; Any database name, passed through as it is.
* = host=$UPSTREAM_HOST port=$UPSTREAM_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $DIR/userlist.txt
admin_users = postgres
stats_users = postgres
pool_mode = transaction
max_client_conn = $MAX_CLIENTS
default_pool_size = $POOL_SIZE
min_pool_size = 0
reserve_pool_size = 0
; Nothing is reset between clients: in transaction mode a server connection carries no session
; state from one transaction to the next (the gateway keeps none there).
server_reset_query =
; node-postgres sends these at startup; PgBouncer would refuse the connection otherwise.
ignore_startup_parameters = extra_float_digits,options,application_name
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
INI
}

up() {
  mkdir -p "$DIR"
  if ours "$(pidof_file "$DIR/pgbouncer.pid")"; then
    echo "pgbouncer already up on 127.0.0.1:$PORT"
    return 0
  fi
  config >"$DIR/pgbouncer.ini"
  echo '"postgres" ""' >"$DIR/userlist.txt"
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$DIR"
  # -d: it daemonizes and writes its pid file itself; the ini path on its command line is what `ours` matches.
  as_pg "$BIN" -d "$DIR/pgbouncer.ini"
  for _ in $(seq 1 50); do
    if ours "$(pidof_file "$DIR/pgbouncer.pid")" && pg_isready -q -h 127.0.0.1 -p "$PORT" -d pgbouncer -U postgres; then
      echo "pgbouncer up: postgres://postgres@127.0.0.1:$PORT/<database> (transaction pooling, $POOL_SIZE server connections per database) in front of $UPSTREAM_HOST:$UPSTREAM_PORT"
      return 0
    fi
    sleep 0.1
  done
  echo "pgbouncer: did not start; see $DIR/pgbouncer.log" >&2
  tail -5 "$DIR/pgbouncer.log" >&2 2>/dev/null || true
  return 1
}

down() {
  local pid; pid=$(pidof_file "$DIR/pgbouncer.pid")
  if ours "$pid"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}

status() {
  if ours "$(pidof_file "$DIR/pgbouncer.pid")"; then
    psql -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d pgbouncer -c 'SHOW POOLS'
  else
    echo "pgbouncer is down"
    return 1
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
