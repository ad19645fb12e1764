#!/usr/bin/env bash
# npm run topology:up -- <name> / npm run topology:down -- <name> / npm run topology:status -- <name>
# Topologies (docs/operations.md, "Running on several machines"):
#   pg-ha          PostgreSQL primary + synchronous standby under Patroni and etcd, HAProxy in front
#   redis-cluster  Redis Cluster: three masters, each with a replica that takes over when it is lost
#   ha             every topology above
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:?usage: topology.sh up|down|status <name>}
name=${2:-ha}
case "$name" in
  ha) parts=(pg-ha redis-cluster) ;;
  pg-ha | redis-cluster) parts=("$name") ;;
  *) echo "unknown topology: $name (pg-ha, redis-cluster, ha)" >&2; exit 2 ;;
esac
for part in "${parts[@]}"; do scripts/topology/"$part".sh "$action"; done
