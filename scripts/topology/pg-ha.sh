#!/usr/bin/env bash
# PostgreSQL 15 with a synchronous standby under Patroni (etcd as its store), HAProxy in front:
# the port of the primary follows a failover by itself (HAProxy asks Patroni's REST API who leads).
#   scripts/topology/pg-ha.sh up|down|status|kill-primary|primary
# Everything runs from Debian's packages (patroni, etcd-server, haproxy), on ports of its own,
# under $SVC_TOPOLOGY_DIR (default /tmp/svc-topology/pg-ha); `down` stops all it started.
set -euo pipefail

DIR="${SVC_TOPOLOGY_DIR:-/tmp/svc-topology}/pg-ha"
PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}"
# Ports below Linux's ephemeral range (32768-60999): an outgoing connection's local port can
# never hold one when a node starts or restarts.
ETCD_PORT="${SVC_HA_ETCD_PORT:-22379}"
PRIMARY_PORT="${SVC_HA_PRIMARY_PORT:-25000}"   # HAProxy: the current primary
REPLICA_PORT="${SVC_HA_REPLICA_PORT:-25001}"   # HAProxy: the standbys (reads)
NODES=(pg1 pg2)
# Two instances can run side by side with other ports and another SVC_TOPOLOGY_DIR.
read -r -a PG_PORTS <<<"${SVC_HA_PG_PORTS:-25432 25433}"
read -r -a API_PORTS <<<"${SVC_HA_API_PORTS:-28008 28009}"

# PostgreSQL refuses to run as root: as root, the nodes run as the postgres user.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pidof_file() { [ -f "$1" ] && cat "$1" 2>/dev/null || true; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
# A pid file can outlive its process and pids wrap: a pid is ours only if its command line names our directory.
ours() { alive "${1:-}" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$DIR"; }

node_config() {
  local name=$1 pg_port=$2 api_port=$3
  cat <<YAML
scope: svc
name: $name
log:
  dir: $DIR/$name
  level: WARNING
restapi:
  listen: 127.0.0.1:$api_port
  connect_address: 127.0.0.1:$api_port
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    # A dead primary's leader key runs out after ttl; loop_wait + 2 x retry_timeout must fit in it.
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 0
    # Only a synchronous standby may be promoted, and a commit waits for its flush: an
    # acknowledged charge is on both nodes.
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        synchronous_commit: 'on'
        max_connections: 300
        wal_log_hints: 'on'
        hot_standby: 'on'
  initdb:
    - encoding: UTF8
    - data-checksums
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$pg_port
  connect_address: 127.0.0.1:$pg_port
  data_dir: $DIR/$name/data
  bin_dir: $PG_BIN
  pgpass: $DIR/$name/pgpass
  authentication:
    replication: {username: replicator, password: replicator}
    superuser: {username: postgres, password: postgres}
    rewind: {username: postgres, password: postgres}
  parameters:
    unix_socket_directories: '$DIR/$name'
YAML
}

haproxy_config() {
  cat <<CFG
global
  maxconn 2000
  pidfile $DIR/haproxy.pid
defaults
  mode tcp
  timeout connect 1s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen primary
  bind 127.0.0.1:$PRIMARY_PORT
  option httpchk OPTIONS /primary
  http-check expect status 200
  default-server inter 300ms fall 2 rise 1 on-marked-down shutdown-sessions
  server pg1 127.0.0.1:${PG_PORTS[0]} check port ${API_PORTS[0]}
  server pg2 127.0.0.1:${PG_PORTS[1]} check port ${API_PORTS[1]}
listen replicas
  bind 127.0.0.1:$REPLICA_PORT
  option httpchk OPTIONS /replica
  http-check expect status 200
  default-server inter 300ms fall 2 rise 1 on-marked-down shutdown-sessions
  server pg1 127.0.0.1:${PG_PORTS[0]} check port ${API_PORTS[0]}
  server pg2 127.0.0.1:${PG_PORTS[1]} check port ${API_PORTS[1]}
CFG
}

start_node() {
  local i=$1 name=${NODES[$1]}
  ours "$(pidof_file "$DIR/$name/patroni.pid")" && return 0
  mkdir -p "$DIR/$name"
  node_config "$name" "${PG_PORTS[$i]}" "${API_PORTS[$i]}" >"$DIR/$name/patroni.yml"
  chmod 700 "$DIR/$name"
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$DIR/$name"
  as_pg bash -c "nohup patroni '$DIR/$name/patroni.yml' >>'$DIR/$name/patroni.out' 2>&1 & echo \$! >'$DIR/$name/patroni.pid'"
}

# The member names and roles Patroni reports, e.g. "pg1 leader running" lines.
members() { curl -sf "http://127.0.0.1:${API_PORTS[$1]:-${API_PORTS[0]}}/cluster" 2>/dev/null | jq -r '.members[] | "\(.name) \(.role) \(.state)"' 2>/dev/null || true; }
any_members() { for i in 0 1; do local m; m=$(members "$i"); [ -n "$m" ] && { echo "$m"; return; }; done; }

wait_healthy() {
  # Bootstrapping (initdb, then pg_basebackup for the standby) takes tens of seconds on a busy machine.
  for _ in $(seq 1 300); do
    local m; m=$(any_members)
    if echo "$m" | grep -q " leader running" && echo "$m" | grep -Eq " sync_standby (running|streaming)" &&
      pg_isready -q -h 127.0.0.1 -p "$PRIMARY_PORT"; then
      return 0
    fi
    sleep 0.5
  done
  echo "pg-ha: the cluster did not become healthy; see $DIR/*/patroni.out" >&2
  any_members >&2
  return 1
}

up() {
  mkdir -p "$DIR"
  if ! ours "$(pidof_file "$DIR/etcd.pid")"; then
    nohup etcd --name svc-etcd --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-cluster "svc-etcd=http://127.0.0.1:$((ETCD_PORT + 1))" \
      >>"$DIR/etcd.out" 2>&1 &
    echo $! >"$DIR/etcd.pid"
    for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null && break; sleep 0.2; done
  fi
  start_node 0
  # The first node bootstraps the cluster; the second then copies it with pg_basebackup.
  for _ in $(seq 1 120); do members 0 | grep -q " leader running" && break; sleep 0.5; done
  start_node 1
  if ! ours "$(pidof_file "$DIR/haproxy.pid")"; then
    haproxy_config >"$DIR/haproxy.cfg"
    haproxy -D -f "$DIR/haproxy.cfg"
  fi
  wait_healthy
  echo "pg-ha up: primary postgres://postgres@127.0.0.1:$PRIMARY_PORT/postgres, standbys postgres://postgres@127.0.0.1:$REPLICA_PORT/postgres"
}

# Kills a process of ours at once: `down` deletes everything it ran on, so a clean stop (Patroni
# stopping PostgreSQL, a shutdown checkpoint) keeps nothing and took 14 s on a loaded machine.
kill_pid() {
  local pid; pid=$(pidof_file "$1")
  ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

down() {
  kill_pid "$DIR/haproxy.pid"
  for name in "${NODES[@]}"; do
    kill_pid "$DIR/$name/patroni.pid"
    # Patroni killed leaves its postmaster behind.
    local pm="$DIR/$name/data/postmaster.pid"
    if [ -f "$pm" ]; then
      local pid; pid=$(head -1 "$pm")
      ours "$pid" && kill -9 "$pid" 2>/dev/null || true
    fi
  done
  pkill -9 -f "$DIR/pg[12]/data" 2>/dev/null || true
  kill_pid "$DIR/etcd.pid"
  # What was killed must be gone before its ports and directory are reused.
  for _ in $(seq 1 100); do pgrep -f "$DIR" >/dev/null || break; sleep 0.1; done
  rm -rf "$DIR"
}

# The member that leads now.
primary() { any_members | awk '$2 == "leader" { print $1 }'; }

# Loses the primary as a machine would: its Patroni and every PostgreSQL process of it, kill -9.
kill_primary() {
  local name; name=$(primary)
  [ -n "$name" ] || { echo "pg-ha: no primary" >&2; return 1; }
  local pid; pid=$(pidof_file "$DIR/$name/patroni.pid")
  ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  pkill -9 -f "$DIR/$name/data" 2>/dev/null || true
  echo "$name"
}

# Brings a killed node back; Patroni rejoins it as a standby (pg_rewind when needed).
restart_node() {
  local name=$1
  for i in 0 1; do [ "${NODES[$i]}" = "$name" ] && start_node "$i"; done
  wait_healthy
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) any_members ;;
  primary) primary ;;
  kill-primary) kill_primary ;;
  restart) restart_node "$2" ;;
  *) echo "usage: $0 up|down|status|primary|kill-primary|restart <node>" >&2; exit 2 ;;
esac
