"""The services `make test` starts (tests/support/<service>.sh): each writes build/<service>/env.sh
when it runs, or build/<service>/unavailable with the reason it could not be installed. A test
reads the exports, or skips naming why they are absent (in CI, where the service must be there,
it fails instead)."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def service_env(directory: str, what: str, target: str) -> dict[str, str]:
    """The exports of <directory>/env.sh, or skip (fail in CI) naming the reason: `what` names the
    service in the message, `target` the make target that starts it."""
    env_file = os.path.join(directory, "env.sh")
    if not os.path.exists(env_file):
        reason = f"{what} not started (run `make {target}`, or `make test`)"
        unavailable = os.path.join(directory, "unavailable")
        if os.path.exists(unavailable):
            with open(unavailable, encoding="utf-8") as fh:
                reason = f"{what} could not be installed: " + fh.read().strip()
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with open(env_file, encoding="utf-8") as fh:
        return dict(re.findall(r"^export (\w+)=(.*)$", fh.read(), re.M))
