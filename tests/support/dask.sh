#!/usr/bin/env bash
# A private Dask cluster for the tests of the data stage on Beam's DaskRunner: a scheduler on
# 127.0.0.1:$PORT and one `dask worker` with 2 worker processes (a nanny each, 1 thread each),
# all from the project's own venv (distributed comes with apache-beam[dask] in the lock; the
# workers import bigtrain from this checkout). Idempotent: pid files under $DIR; a running,
# answering scheduler with its 2 workers is left as it is. Writes $DIR/env.sh
# (BIGTRAIN_DASK_ADDRESS) for the tests and for a shell (`. build/dask/env.sh`); when it cannot
# start outside CI it writes $DIR/unavailable with the reason instead (the Dask tests then skip,
# naming it); in CI that is an error.
# Usage: tests/support/dask.sh start|stop   (DIR=build/dask PORT=28786 by default)
set -euo pipefail
DIR=${BIGTRAIN_DASK_DIR:-$(pwd)/build/dask}
PORT=${BIGTRAIN_DASK_PORT:-28786}
PY=${BIGTRAIN_DASK_PYTHON:-$(pwd)/.venv/bin/python}
ADDRESS=tcp://127.0.0.1:$PORT
WORKERS=2
mkdir -p "$DIR"

unavailable() {  # outside CI the Dask tests skip with this reason; in CI it is an error
  echo "dask: $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; rm -f "$DIR/env.sh"; exit 0
}

# Each runs as its own process group (setsid): stop ends the scheduler, the nannies and their
# worker processes by the recorded pids.
stop() {
  for name in worker scheduler; do
    [ -f "$DIR/$name.pid" ] && kill -- "-$(cat "$DIR/$name.pid")" 2>/dev/null || true
    rm -f "$DIR/$name.pid"
  done
}
if [ "${1:-start}" = stop ]; then stop; rm -f "$DIR/env.sh"; exit 0; fi
rm -f "$DIR/unavailable"
"$PY" -c "import distributed" 2>/dev/null \
  || unavailable "distributed is not installed in $PY (run make setup: apache-beam[dask])"

# How many workers the scheduler knows (0 when it does not answer).
workers() {
  "$PY" - "$ADDRESS" <<'PY' 2>/dev/null || echo 0
import sys
from distributed import Client
with Client(sys.argv[1], timeout=3) as client:
    print(len(client.scheduler_info()["workers"]))
PY
}
alive() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }
if alive scheduler && alive worker && [ "$(workers)" = "$WORKERS" ]; then
  echo "dask: already running on $ADDRESS ($WORKERS workers)"
else
  stop
  setsid nohup "$PY" -m distributed.cli.dask_scheduler --host 127.0.0.1 --port "$PORT" \
    --no-dashboard --dashboard-address 127.0.0.1:0 >"$DIR/scheduler.log" 2>&1 < /dev/null &
  echo $! > "$DIR/scheduler.pid"
  setsid nohup "$PY" -m distributed.cli.dask_worker "$ADDRESS" --nworkers "$WORKERS" \
    --nthreads 1 --memory-limit 0 --host 127.0.0.1 --no-dashboard --dashboard-address 127.0.0.1:0 --local-directory "$DIR/work" \
    >"$DIR/worker.log" 2>&1 < /dev/null &
  echo $! > "$DIR/worker.pid"
  for _ in $(seq 1 120); do [ "$(workers)" = "$WORKERS" ] && break; sleep 1; done
  [ "$(workers)" = "$WORKERS" ] || { tail -20 "$DIR/scheduler.log" "$DIR/worker.log" >&2; stop
    unavailable "the Dask scheduler on $ADDRESS did not get $WORKERS workers (logs in $DIR)"; }
  echo "dask: started a scheduler on $ADDRESS and $WORKERS worker processes (logs in $DIR)"
fi
cat > "$DIR/env.sh" <<ENV
# Written by tests/support/dask.sh: a Dask scheduler on loopback. Source it: . $DIR/env.sh
export BIGTRAIN_DASK_ADDRESS=$ADDRESS
ENV
echo "dask: env in $DIR/env.sh"
