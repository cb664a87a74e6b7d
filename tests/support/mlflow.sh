#!/usr/bin/env bash
# A private MLflow tracking server for the tracking tests: the full `mlflow` package (its server
# needs Flask, gunicorn and more that the product's lock, which carries the client mlflow-skinny
# only, does not) in its own venv under $DIR, installed from its own lock,
# tests/support/mlflow.lock (every package pinned with its hashes, installed with --no-deps),
# rebuilt when that lock changes; `make mlflow-lock` re-resolves it from tests/support/mlflow.in.
# Started on loopback with a pid file and a sqlite store under $DIR, idempotent. Writes
# $DIR/env.sh (BIGTRAIN_MLFLOW_URI) for the tests and for a shell (`. build/mlflow/env.sh`);
# when it cannot be installed outside CI it writes $DIR/unavailable with the reason instead (the
# MLflow server tests then skip, naming it); in CI that is an error.
# Usage: tests/support/mlflow.sh start|stop   (DIR=build/mlflow PORT=29100 by default)
set -euo pipefail
DIR=${BIGTRAIN_MLFLOW_DIR:-$(pwd)/build/mlflow}
PORT=${BIGTRAIN_MLFLOW_PORT:-29100}
PYTHON=${PYTHON:-python3.11}
LOCK=$(cd "$(dirname "$0")" && pwd)/mlflow.lock
VENV=$DIR/venv PIDFILE=$DIR/mlflow.pid LOG=$DIR/mlflow.log
URI=http://127.0.0.1:$PORT
INSTALL_LOG=$DIR/install.log
source "$(dirname "$0")/locked_venv.sh"
mkdir -p "$DIR"

unavailable() {  # outside CI the MLflow server tests skip with this reason; in CI it is an error
  echo "mlflow: $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; rm -f "$DIR/env.sh"; exit 0
}

# The server runs as a process group (gunicorn and its workers): stop them all, by its pid. Its
# job runner's huey consumers start sessions of their own (seen 2026-11-28: 3 left running,
# ~240 MB each, after a stop): they are found by this venv's interpreter in their command line.
stop() {
  [ -f "$PIDFILE" ] && kill -- "-$(cat "$PIDFILE")" 2>/dev/null || true; rm -f "$PIDFILE"
  pkill -f "^$VENV/bin/python -m huey.bin.huey_consumer " 2>/dev/null || true
}
# A stopped service leaves no env file: its tests then skip naming it, not fail to connect.
if [ "${1:-start}" = stop ]; then stop; rm -f "$DIR/env.sh"; exit 0; fi
rm -f "$DIR/unavailable"

refresh_locked_venv mlflow mlflow

up() { "$VENV/bin/python" -c "import urllib.request; urllib.request.urlopen('$URI/health', timeout=2)" >/dev/null 2>&1; }
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && up; then
  echo "mlflow: already running on $URI"
else
  stop
  # setsid: its own process group, so that stop ends the server and its workers together.
  setsid nohup "$VENV/bin/mlflow" server --host 127.0.0.1 --port "$PORT" --workers 1 \
    --backend-store-uri "sqlite:///$DIR/mlflow.db" --default-artifact-root "$DIR/artifacts" \
    >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 120); do up && break; sleep 0.5; done
  up || { tail -20 "$LOG" >&2; unavailable "mlflow server did not answer on $URI (log $LOG)"; }
  echo "mlflow: started the tracking server on $URI (pid $(cat "$PIDFILE"), log $LOG)"
fi
cat > "$DIR/env.sh" <<ENV
# Written by tests/support/mlflow.sh: the MLflow tracking server on loopback. Source it: . $DIR/env.sh
export BIGTRAIN_MLFLOW_URI=$URI
ENV
echo "mlflow: env in $DIR/env.sh"
