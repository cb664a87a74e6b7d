#!/usr/bin/env bash
# A private S3-protocol object store for the object-storage tests: moto's standalone server
# (`moto[server]`, S3 spoken over HTTP) in its own venv under $DIR (it needs Flask 3, which the
# product's lock does not carry), started on loopback with a pid file, one bucket, idempotent.
# The venv is installed from its own lock, tests/support/objectstore.lock (every package pinned
# with its hashes, installed with --no-deps: nothing is resolved at install time), and rebuilt
# when that lock changes; `make objectstore-lock` re-resolves it from tests/support/objectstore.in.
# Writes $DIR/env.sh (export lines: endpoint, credentials, region, BIGTRAIN_S3_BUCKET) for the
# tests and for a shell (`. build/objectstore/env.sh`); when it cannot be installed outside CI it
# writes $DIR/unavailable with the reason instead (the S3 tests then skip, naming it).
# Usage: tests/support/objectstore.sh start|stop   (DIR=build/objectstore PORT=29000 by default)
set -euo pipefail
DIR=${BIGTRAIN_OBJECTSTORE_DIR:-$(pwd)/build/objectstore}
PORT=${BIGTRAIN_OBJECTSTORE_PORT:-29000}
BUCKET=${BIGTRAIN_S3_BUCKET:-bigtrain-test}
PYTHON=${PYTHON:-python3.11}
LOCK=$(cd "$(dirname "$0")" && pwd)/objectstore.lock
VENV=$DIR/venv PIDFILE=$DIR/moto.pid LOG=$DIR/moto.log
ENDPOINT=http://127.0.0.1:$PORT
INSTALL_LOG=$DIR/install.log
source "$(dirname "$0")/locked_venv.sh"
mkdir -p "$DIR"

unavailable() {  # outside CI the S3 tests skip with this reason; in CI it is an error
  echo "objectstore: $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; rm -f "$DIR/env.sh"; exit 0
}

stop() { [ -f "$PIDFILE" ] && kill "$(cat "$PIDFILE")" 2>/dev/null || true; rm -f "$PIDFILE"; }
# A stopped service leaves no env file: its tests then skip naming it, not fail to connect.
if [ "${1:-start}" = stop ]; then stop; rm -f "$DIR/env.sh"; exit 0; fi
rm -f "$DIR/unavailable"

refresh_locked_venv objectstore moto_server   # a new lock or a half-done install rebuilds it

up() { "$VENV/bin/python" -c "import urllib.request,sys; urllib.request.urlopen('$ENDPOINT/moto-api/', timeout=2)" >/dev/null 2>&1; }
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && up; then
  echo "objectstore: already running on $ENDPOINT"
else
  nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" >"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 60); do up && break; sleep 0.5; done
  up || { tail -20 "$LOG" >&2; unavailable "moto_server did not answer on $ENDPOINT (log $LOG)"; }
  echo "objectstore: started moto on $ENDPOINT (pid $(cat "$PIDFILE"), log $LOG)"
fi
# moto keeps buckets in memory: (re)create the bucket on every start; creating an existing one is fine.
AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "$VENV/bin/python" - "$ENDPOINT" "$BUCKET" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
if sys.argv[2] not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
    s3.create_bucket(Bucket=sys.argv[2])
PY
cat > "$DIR/env.sh" <<ENV
# Written by tests/support/objectstore.sh: the moto S3 server on loopback. Source it: . $DIR/env.sh
export BIGTRAIN_S3_BUCKET=$BUCKET
export AWS_ACCESS_KEY_ID=testing
export AWS_SECRET_ACCESS_KEY=testing
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
# boto3 (Beam's S3 filesystem) reads the endpoint from AWS_ENDPOINT_URL (botocore >= 1.31).
export AWS_ENDPOINT_URL=$ENDPOINT
# tensorflow-io's S3 filesystem (tf.io.gfile after \`import tensorflow_io\`).
export S3_ENDPOINT=$ENDPOINT
export S3_USE_HTTPS=0
export S3_VERIFY_SSL=0
export AWS_EC2_METADATA_DISABLED=true
ENV
echo "objectstore: bucket s3://$BUCKET; env in $DIR/env.sh"
