#!/usr/bin/env bash
# Headless Chromium and its WebDriver from Debian's packages (apt-get when absent), for the browser
# tests of `bigtrain ui` (tests/ui/test_browser.py); idempotent. Writes $DIR/env with the paths the
# tests use; when they cannot be installed outside CI it writes $DIR/unavailable with the reason
# instead (the browser tests then skip, naming it). In CI that is an error.
# Usage: tests/support/browser.sh   (DIR=build/browser by default)
set -euo pipefail
DIR=${BIGTRAIN_BROWSER_DIR:-$(pwd)/build/browser}
mkdir -p "$DIR"
rm -f "$DIR/unavailable"

unavailable() {
  echo "browser: $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "$1" > "$DIR/unavailable"; rm -f "$DIR/env"; exit 0
}

find_chromium() { command -v chromium || command -v chromium-browser || true; }
find_driver() { [ -x /usr/bin/chromedriver ] && echo /usr/bin/chromedriver || command -v chromedriver || true; }

if [ -z "$(find_chromium)" ] || [ -z "$(find_driver)" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    unavailable "chromium / chromium-driver are not installed and this user cannot run apt-get (no root, no sudo)"; fi
  echo "browser: installing chromium and chromium-driver from Debian's packages (apt-get)"
  $SUDO apt-get update -qq || unavailable "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      chromium chromium-driver fonts-dejavu-core >/dev/null || unavailable "apt-get install chromium chromium-driver failed"
fi
CHROMIUM=$(find_chromium); DRIVER=$(find_driver)
[ -n "$CHROMIUM" ] && [ -n "$DRIVER" ] || unavailable "chromium or chromedriver missing after the install"
"$CHROMIUM" --headless --no-sandbox --version >/dev/null 2>&1 || unavailable "$CHROMIUM does not start: $("$CHROMIUM" --headless --no-sandbox --version 2>&1 | tail -1)"
cat > "$DIR/env" <<ENV
BIGTRAIN_TEST_CHROMIUM=$CHROMIUM
BIGTRAIN_TEST_CHROMEDRIVER=$DRIVER
ENV
echo "browser: $("$CHROMIUM" --version 2>/dev/null) with $DRIVER"
