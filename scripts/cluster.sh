#!/usr/bin/env bash
# A local Redis Cluster with the imid module: 3 primaries with 1 replica each, on loopback.
#
#   scripts/cluster.sh start   # (make cluster) start 6 nodes and create the cluster
#   scripts/cluster.sh stop    # shut the nodes down
#   scripts/cluster.sh status  # CLUSTER NODES of the first node
#
# Ports: IMID_CLUSTER_PORT (default 7100) .. +5. Data: IMID_CLUSTER_DIR (default
# ./data/cluster)/<port>. Any
# `imid.<name> value` settings can be appended to every node with IMID_CLUSTER_ARGS. The
# server binary is REDIS_SERVER (default redis-server; a valkey-server works too).
set -euo pipefail
cd "$(dirname "$0")/.."

base=${IMID_CLUSTER_PORT:-7100}
server=${REDIS_SERVER:-redis-server}
module=${IMID_MODULE:-$(pwd)/target/release/libimid.so}
root=${IMID_CLUSTER_DIR:-$(pwd)/data/cluster}
ports=$(seq "$base" $((base + 5)))

start() {
  [ -f "$module" ] || { echo "build the module first: make build" >&2; exit 1; }
  for p in $ports; do
    mkdir -p "$root/$p"
    # shellcheck disable=SC2086
    "$server" --port "$p" --bind 127.0.0.1 --dir "$root/$p" --daemonize yes \
      --logfile "$root/$p/redis.log" --pidfile "$root/$p/redis.pid" \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 3000 \
      --appendonly yes --loadmodule "$module" ${IMID_CLUSTER_ARGS:-}
  done
  for p in $ports; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  if [ "$(redis-cli -p "$base" cluster info | tr -d '\r' | awk -F: '/cluster_slots_assigned/{print $2}')" != "16384" ]; then
    nodes=""
    for p in $ports; do nodes="$nodes 127.0.0.1:$p"; done
    # shellcheck disable=SC2086
    redis-cli --cluster create $nodes --cluster-replicas 1 --cluster-yes
  fi
  # Every node must see the whole cluster, not just the first: the others learn the slot map
  # by gossip, seconds later on a busy machine. Bounded: 60 s.
  local pending=""
  for _ in $(seq 600); do
    pending=""
    for p in $ports; do
      state=$(redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' | awk -F: '/cluster_state/{print $2}')
      [ "$state" = ok ] || pending="$pending $p"
    done
    [ -z "$pending" ] && break
    sleep 0.1
  done
  if [ -n "$pending" ]; then
    echo "cluster not ok after 60 s on port(s)$pending (logs: $root/<port>/redis.log)" >&2
    exit 1
  fi
  echo "cluster up: redis-cli -c -p $base   (stop: scripts/cluster.sh stop)"
}

stop() {
  for p in $ports; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) redis-cli -p "$base" cluster nodes ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
