#!/usr/bin/env bash
# Redis Cluster: three masters, each with a replica that takes over when its master is lost.
#   scripts/topology/redis-cluster.sh up|down|status|masters|kill-master <n>|restart <n>
# <n> is a node's number (1-6) or its port. Everything runs from Debian's redis-server, on ports
# of its own, under $SVC_TOPOLOGY_DIR (default /tmp/svc-topology/redis-cluster); `down` stops
# all it started. The gateways use it with REDIS_CLUSTER_NODES=127.0.0.1:26001,127.0.0.1:26002,...
set -euo pipefail

ROOT_DIR="${SVC_TOPOLOGY_DIR:-/tmp/svc-topology}"
DIR="$ROOT_DIR/redis-cluster"
# Two instances can run side by side with other ports and another SVC_TOPOLOGY_DIR. Every port,
# and its bus port (port - 10000), lies below Linux's ephemeral range (32768-60999), where a
# client socket could hold one.
read -r -a PORTS <<<"${SVC_REDIS_CLUSTER_PORTS:-26001 26002 26003 26004 26005 26006}"
# The cluster bus listens on port + 10000 by default (67001...: not a port); 10000 below instead.
bus_port() { echo $(($1 - 10000)); }

cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
pidof_file() { [ -f "$1" ] && cat "$1" 2>/dev/null || true; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
# A pid file can outlive its process and pids wrap: a pid is ours only if it is a redis-server
# on our port (its process title names the port) working in our directory (--dir).
ours() {
  local pid=${1:-} port=${2:-}
  alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server .*:$port\b" &&
    [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$DIR/$port" ]
}
node_pid() { pidof_file "$DIR/$1/redis.pid"; }
running() { ours "$(node_pid "$1")" "$1"; }

# A node's number (1-6) or its port, as a port.
port_of() {
  local n=${1:?a node number (1-${#PORTS[@]}) or port}
  if [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le ${#PORTS[@]} ]; then echo "${PORTS[$((n - 1))]}"; return; fi
  for p in "${PORTS[@]}"; do [ "$p" = "$n" ] && { echo "$p"; return; }; done
  echo "redis-cluster: no node $n (1-${#PORTS[@]} or one of ${PORTS[*]})" >&2
  return 2
}

launch() {
  local port=$1
  # nodes.conf keeps the node's identity and the cluster's layout across a restart; the data
  # itself is not kept (no RDB, no AOF), as in the production layout.
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
    --dir "$DIR/$port" --pidfile "$DIR/$port/redis.pid" --logfile "$DIR/$port/redis.log" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$(bus_port "$port")" \
    --cluster-node-timeout 2000 --cluster-require-full-coverage no --cluster-replica-validity-factor 0 \
    --save "" --appendonly no 9>&-
}

start_node() {
  local port=$1
  running "$port" && return 0
  mkdir -p "$DIR/$port"
  # A port given in Linux's ephemeral range (32768-60999) may be held a moment by a client
  # connection, and the bind fails: tried again until it is free.
  for _ in $(seq 1 20); do
    local lines=0
    [ -f "$DIR/$port/redis.log" ] && lines=$(wc -l <"$DIR/$port/redis.log")
    launch "$port"
    for _ in $(seq 1 50); do
      cli "$port" ping >/dev/null 2>&1 && return 0
      tail -n +"$((lines + 1))" "$DIR/$port/redis.log" 2>/dev/null | grep -q 'Address already in use' && break
      sleep 0.1
    done
    tail -n +"$((lines + 1))" "$DIR/$port/redis.log" 2>/dev/null | grep -q 'Address already in use' || break
    sleep 0.5
  done
  echo "redis-cluster: node $port did not start; see $DIR/$port/redis.log" >&2
  return 1
}

# `cluster nodes` from the first node that answers.
cluster_nodes() {
  for p in "${PORTS[@]}"; do
    local out; out=$(cli "$p" cluster nodes 2>/dev/null) && [ -n "$out" ] && { echo "$out"; return; }
  done
  echo "redis-cluster: no node answers on ${PORTS[*]}" >&2
  return 1
}

# Healthy: every running node says cluster_state:ok and knows them all, every slot is served by
# a master that is up, and every replica has finished its first sync.
healthy() {
  local p info
  for p in "${PORTS[@]}"; do
    running "$p" || continue
    info=$(cli "$p" cluster info 2>/dev/null) || return 1
    grep -q '^cluster_state:ok' <<<"$info" || return 1
    grep -q "^cluster_known_nodes:${#PORTS[@]}" <<<"$info" || return 1
    grep -q '^cluster_slots_ok:16384' <<<"$info" || return 1
    if cli "$p" role 2>/dev/null | head -1 | grep -q slave; then
      cli "$p" info replication 2>/dev/null | grep -q '^master_link_status:up' || return 1
    fi
  done
}

wait_healthy() {
  for _ in $(seq 1 240); do
    healthy && return 0
    sleep 0.25
  done
  echo "redis-cluster: the cluster did not become healthy; see $DIR/*/redis.log" >&2
  cluster_nodes >&2 || true
  return 1
}

up() {
  mkdir -p "$DIR"
  for port in "${PORTS[@]}"; do start_node "$port"; done
  # Created once: a node that restarts rejoins from its nodes.conf.
  if [ "$(cli "${PORTS[0]}" cluster info | awk -F: '/^cluster_slots_assigned/ { print $2 }' | tr -d '\r')" = 0 ]; then
    local nodes=()
    for port in "${PORTS[@]}"; do nodes+=("127.0.0.1:$port"); done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/create.out" 2>&1 || {
      cat "$DIR/create.out" >&2
      return 1
    }
  fi
  wait_healthy
  local list; list=$(printf '127.0.0.1:%s,' "${PORTS[@]}")
  echo "redis-cluster up: REDIS_CLUSTER_NODES=${list%,}"
}

stop_node() {
  local port=$1 pid; pid=$(node_pid "$port")
  if ours "$pid" "$port"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    ours "$pid" "$port" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/$port/redis.pid"
}

down() {
  for port in "${PORTS[@]}"; do stop_node "$port"; done
  rm -rf "$DIR"
}

# One line per node: port, role, state, slots served (e.g. "26001 master connected 0-5460").
status() {
  cluster_nodes | awk '{ split($2, a, "@"); split(a[1], h, ":"); role = ($3 ~ /master/) ? "master" : "replica";
    state = ($3 ~ /fail/) ? "failed" : $8; slots = ""; for (i = 9; i <= NF; i++) slots = slots " " $i;
    print h[2], role, state slots }' | sort -n
}

# The masters serving slots now, one line each: port and slot ranges.
masters() { status | awk '$2 == "master" && $3 == "connected" && NF > 3 { $2 = ""; $3 = ""; print }' | tr -s ' '; }

# Loses a master as a machine would (kill -9); its replica is promoted after the node timeout.
kill_master() {
  local port; port=$(port_of "$1")
  masters | awk '{ print $1 }' | grep -qx "$port" || { echo "redis-cluster: $port is not a master serving slots" >&2; return 1; }
  local pid; pid=$(node_pid "$port")
  ours "$pid" "$port" || { echo "redis-cluster: $port is not running" >&2; return 1; }
  kill -9 "$pid"
  echo "$port"
}

# Brings a node back; one whose replica took over rejoins as that replica's replica.
restart_node() {
  local port; port=$(port_of "$1")
  start_node "$port"
  wait_healthy
}

# Two `up`s at once (two test files, an operator and a test) must not both create the cluster.
locked() {
  mkdir -p "$ROOT_DIR"
  exec 9>"$ROOT_DIR/redis-cluster.lock"
  flock -w 300 9 || { echo "redis-cluster: another run holds $ROOT_DIR/redis-cluster.lock" >&2; return 1; }
  "$@"
}

case "${1:-}" in
  up) locked up ;;
  down) locked down ;;
  status) status ;;
  masters) masters ;;
  kill-master) locked kill_master "${2:-}" ;;
  restart) locked restart_node "${2:-}" ;;
  *) echo "usage: $0 up|down|status|masters|kill-master <n>|restart <n>" >&2; exit 2 ;;
esac
