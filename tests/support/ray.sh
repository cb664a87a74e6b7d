#!/usr/bin/env bash
# A private Ray cluster for the Ray training tests (runtime.cluster=ray): a head node and one
# worker node, separate processes on loopback, each with few CPUs, from the product's own venv
# (ray[train] is in the lock), their temp and session folders under $DIR. Idempotent: a head
# that answers with both nodes alive is kept. Writes $DIR/env.sh (BIGTRAIN_RAY_ADDRESS) for the
# tests and for a shell (`. build/ray/env.sh`); when it cannot start outside CI it writes
# $DIR/unavailable with the reason instead (the Ray tests then skip, naming it); in CI: an error.
# `stop` ends only this cluster's processes: those whose command line names $DIR (never
# `ray stop`, which would end every Ray cluster of the machine's user).
# Usage: tests/support/ray.sh start|stop   (DIR=build/ray PORT=29200 CPUS=2 by default)
set -euo pipefail
DIR=${BIGTRAIN_RAY_DIR:-$(pwd)/build/ray}
PORT=${BIGTRAIN_RAY_PORT:-29200}
CPUS=${BIGTRAIN_RAY_CPUS:-2}           # each node's; a training worker holds 1 (runtime.ray)
RAY=${RAY:-$(pwd)/.venv/bin/ray}
ADDRESS=127.0.0.1:$PORT
TEMP=$DIR/t                            # short: Ray's socket paths under it must fit 107 bytes
LOG=$DIR/ray.log
mkdir -p "$DIR"

unavailable() {
  echo "ray: $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; rm -f "$DIR/env.sh"; exit 0
}

# This cluster's processes: those whose command line names its temp folder (gcs_server, raylets,
# workers) and those holding a file open under it (the dashboard and runtime-env agents rename
# their command line to `ray::...`; seen 2026-12-07 left running after their raylet had stopped).
pids() {
  { pgrep -f -- "$TEMP/" || true
    for pid in $(pgrep -f '^ray::' || true); do
      ls -l "/proc/$pid/fd" 2>/dev/null | grep -q -- "-> $TEMP/" && echo "$pid"
    done; } | sort -un
}
stop() {
  local pid
  for pid in $(pids); do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 20); do [ -z "$(pids)" ] && break; sleep 0.5; done
  for pid in $(pids); do kill -9 "$pid" 2>/dev/null || true; done
}
if [ "${1:-start}" = stop ]; then stop; rm -f "$DIR/env.sh"; echo "ray: stopped"; exit 0; fi
rm -f "$DIR/unavailable"
[ -x "$RAY" ] || unavailable "no $RAY (run make setup: ray[train] is in the lock)"

# Up: the head answers and two nodes are alive.
nodes() {
  "$(dirname "$RAY")/python" - "$ADDRESS" <<'PY' 2>/dev/null
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
print(sum(1 for node in ray.nodes() if node["Alive"]))
PY
}
if [ -n "$(pids)" ] && [ "$(nodes)" = 2 ]; then
  echo "ray: already running at $ADDRESS (2 nodes)"
else
  stop
  export RAY_USAGE_STATS_ENABLED=0
  # Ray's own dashboard ports (8265 and the agents') are left at their defaults: with
  # --dashboard-port / --dashboard-agent-listen-port set, the head's raylet died once at start
  # (2026-12-07, node_manager.cc "Check failed", load ~12 on 2 cores); not set, it started.
  {
    "$RAY" start --head --port "$PORT" --node-ip-address 127.0.0.1 --num-cpus "$CPUS" \
      --temp-dir "$TEMP" --include-dashboard false --ray-client-server-port $((PORT + 1)) \
      --min-worker-port $((PORT + 100)) --max-worker-port $((PORT + 299)) --disable-usage-stats
    "$RAY" start --address "$ADDRESS" --node-ip-address 127.0.0.1 --num-cpus "$CPUS" \
      --min-worker-port $((PORT + 300)) --max-worker-port $((PORT + 499)) --disable-usage-stats
  } > "$LOG" 2>&1 || { tail -20 "$LOG" >&2; stop; unavailable "ray start failed (log $LOG)"; }
  [ "$(nodes)" = 2 ] || { tail -20 "$LOG" >&2; stop; unavailable "the cluster at $ADDRESS has not 2 nodes alive (log $LOG)"; }
  echo "ray: started a head and a worker node at $ADDRESS ($CPUS CPUs each; log $LOG)"
fi
cat > "$DIR/env.sh" <<ENV
# Written by tests/support/ray.sh: the Ray cluster on loopback. Source it: . $DIR/env.sh
export BIGTRAIN_RAY_ADDRESS=$ADDRESS
ENV
echo "ray: env in $DIR/env.sh"
