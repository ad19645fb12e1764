#!/usr/bin/env bash
# npm run topology:up -- <name> / npm run topology:down -- <name> / npm run topology:status -- <name>
# Topologies (docs/operations.md, "Running on several machines"):
#   pg-ha          PostgreSQL primary + synchronous standby under Patroni and etcd, HAProxy in front
#   pgbouncer      PgBouncer in transaction mode (in `ha`: in front of pg-ha's primary port)
#   redis-cluster  Redis Cluster: three masters, each with a replica that takes over when it is lost
#   ha             every topology above
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:?usage: topology.sh up|down|status <name>}
name=${2:-ha}
case "$name" in
  ha) parts=(pg-ha pgbouncer redis-cluster) ;;
  pg-ha | pgbouncer | redis-cluster) parts=("$name") ;;
  *) echo "unknown topology: $name (pg-ha, pgbouncer, redis-cluster, ha)" >&2; exit 2 ;;
esac
# In `ha`, PgBouncer sits in front of pg-ha's primary (HAProxy) unless told otherwise.
if [ "$name" = ha ]; then export SVC_PGBOUNCER_UPSTREAM_PORT="${SVC_PGBOUNCER_UPSTREAM_PORT:-${SVC_HA_PRIMARY_PORT:-25000}}"; fi
for part in "${parts[@]}"; do scripts/topology/"$part".sh "$action"; done
