#!/usr/bin/env bash
# A private MariaDB server for the MySQL metadata tests: installed from Debian's packages when
# absent (apt-get), started on loopback with its own datadir and port, one user, idempotent.
# Writes $DIR/env (BIGTRAIN_TEST_MYSQL_*) for the tests; when MariaDB cannot be installed outside
# CI it writes $DIR/unavailable with the reason instead (the MySQL tests then skip, naming it).
# Usage: tests/support/mariadb.sh start|stop   (DIR=build/mariadb PORT=23306 by default)
set -euo pipefail
DIR=${BIGTRAIN_MARIADB_DIR:-$(pwd)/build/mariadb}
PORT=${BIGTRAIN_MARIADB_PORT:-23306}
USER_NAME=bigtrain PASSWORD=bigtrain
SOCK=$DIR/mysqld.sock PIDFILE=$DIR/mysqld.pid
mkdir -p "$DIR"
export PATH="$PATH:/usr/sbin:/sbin"

unavailable() {  # outside CI the MySQL tests skip with this reason; in CI it is an error
  echo "mariadb: $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; rm -f "$DIR/env"; exit 0
}

if [ "${1:-start}" = stop ]; then  # no env file left: its tests then skip, naming it
  [ -f "$PIDFILE" ] && kill "$(cat "$PIDFILE")" 2>/dev/null || true
  rm -f "$DIR/env"
  exit 0
fi
rm -f "$DIR/unavailable"

if ! command -v mariadbd >/dev/null && ! command -v mysqld >/dev/null; then
  if [ "$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    unavailable "mariadb-server is not installed and this user cannot run apt-get (no root, no sudo)"; fi
  echo "mariadb: installing mariadb-server from Debian's packages (apt-get)"
  $SUDO apt-get update -qq || unavailable "apt-get update failed"
  # policy-rc.d 101: the package must not start the system-wide service; we start our own.
  POLICY=/usr/sbin/policy-rc.d; ADDED=
  if [ ! -e $POLICY ]; then printf '#!/bin/sh\nexit 101\n' | $SUDO tee $POLICY >/dev/null; $SUDO chmod +x $POLICY; ADDED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      mariadb-server mariadb-client >/dev/null || { [ -n "$ADDED" ] && $SUDO rm -f $POLICY; unavailable "apt-get install mariadb-server failed"; }
  [ -n "$ADDED" ] && $SUDO rm -f $POLICY
fi
SERVER=$(command -v mariadbd || command -v mysqld)
CLIENT=$(command -v mariadb || command -v mysql)
ADMIN=$(command -v mariadb-admin || command -v mysqladmin)
RUN_AS=(); [ "$(id -u)" = 0 ] && RUN_AS=(--user=root)

if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && "$ADMIN" --socket="$SOCK" -uroot ping >/dev/null 2>&1; then
  echo "mariadb: already running on 127.0.0.1:$PORT (datadir $DIR/data)"
else
  if [ ! -d "$DIR/data/mysql" ]; then
    INSTALL_DB=$(command -v mariadb-install-db || command -v mysql_install_db)
    "$INSTALL_DB" --no-defaults "${RUN_AS[@]}" --datadir="$DIR/data" --auth-root-authentication-method=normal \
        --skip-test-db >"$DIR/install.log" 2>&1 || { cat "$DIR/install.log" >&2; exit 1; }
  fi
  "$SERVER" --no-defaults "${RUN_AS[@]}" --datadir="$DIR/data" --port="$PORT" --bind-address=127.0.0.1 \
      --socket="$SOCK" --pid-file="$PIDFILE" --skip-name-resolve --innodb-buffer-pool-size=64M \
      --log-error="$DIR/error.log" >/dev/null 2>&1 &
  for _ in $(seq 1 60); do
    "$ADMIN" --socket="$SOCK" -uroot ping >/dev/null 2>&1 && break; sleep 0.5
  done
  "$ADMIN" --socket="$SOCK" -uroot ping >/dev/null 2>&1 || { tail -20 "$DIR/error.log" >&2; exit 1; }
  echo "mariadb: started on 127.0.0.1:$PORT (datadir $DIR/data, log $DIR/error.log)"
fi
"$CLIENT" --socket="$SOCK" -uroot -e "CREATE DATABASE IF NOT EXISTS bigtrain;
  CREATE USER IF NOT EXISTS '$USER_NAME'@'127.0.0.1' IDENTIFIED BY '$PASSWORD';
  GRANT ALL PRIVILEGES ON *.* TO '$USER_NAME'@'127.0.0.1'; FLUSH PRIVILEGES;"
cat > "$DIR/env" <<ENV
BIGTRAIN_TEST_MYSQL_HOST=127.0.0.1
BIGTRAIN_TEST_MYSQL_PORT=$PORT
BIGTRAIN_TEST_MYSQL_USER=$USER_NAME
BIGTRAIN_TEST_MYSQL_PASSWORD=$PASSWORD
BIGTRAIN_TEST_MYSQL_DATABASE=bigtrain
ENV
