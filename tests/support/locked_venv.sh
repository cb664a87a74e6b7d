# Sourced by the service scripts (objectstore.sh, hfloader.sh, mlflow.sh): locked_venv VENV LOCK [PIP ARGS...]
# creates VENV with $PYTHON and installs LOCK into it exactly (--no-deps --require-hashes: nothing
# is resolved at install time). With the project's uv ($UV, installed by `make setup`) when it
# is there: on the 2-core dev VM (2026-11-27) uv took 3 s for the S3 server's lock and 9 s for
# PyTorch + transformers from an empty cache, against 47 s and 68 s for pip in the CI run before
# (pip installs one wheel at a time and compiles every .py). Without uv, plain pip as before.
# Output goes to $INSTALL_LOG; returns non-zero on failure (the caller names it).
locked_venv() {
  local venv=$1 lock=$2; shift 2
  if [ -x "${UV:-}" ]; then
    "$UV" venv --quiet --python "$PYTHON" "$venv" >>"$INSTALL_LOG" 2>&1 \
      && "$UV" pip install --quiet --python "$venv/bin/python" --no-deps --require-hashes "$@" \
           -r "$lock" >>"$INSTALL_LOG" 2>&1
  else
    "$PYTHON" -m venv "$venv" >>"$INSTALL_LOG" 2>&1 \
      && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
           --require-hashes "$@" -r "$lock" >>"$INSTALL_LOG" 2>&1
  fi
}

# refresh_locked_venv LABEL EXECUTABLE: the server scripts' venv records the lock it was
# installed from; another lock, or a half-done install (bin/EXECUTABLE missing), rebuilds it from
# $LOCK into $VENV. Calls the caller's `stop` first (a server still running from the old venv
# would outlive its files) and its `unavailable` when the install fails.
refresh_locked_venv() {
  if cmp -s "$LOCK" "$VENV/installed.lock" && [ -x "$VENV/bin/$2" ]; then return 0; fi
  echo "$1: installing $LOCK into $VENV"
  stop; rm -rf "$VENV"
  : > "$INSTALL_LOG"
  locked_venv "$VENV" "$LOCK" || unavailable "installing $LOCK into $VENV failed (see $INSTALL_LOG)"
  cp "$LOCK" "$VENV/installed.lock"
}
