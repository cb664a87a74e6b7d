"""The S3 server `make objectstore` starts (tests/support/objectstore.sh): its environment, or a
skip naming why it is absent (in CI, where it must be there, a failure instead)."""

from __future__ import annotations

import os
import re
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBJECTSTORE_DIR = os.environ.get("BIGTRAIN_OBJECTSTORE_DIR", os.path.join(ROOT, "build", "objectstore"))


def objectstore_env() -> dict[str, str]:
    """The exports of build/objectstore/env.sh, or skip (fail in CI) naming the reason."""
    env_file = os.path.join(OBJECTSTORE_DIR, "env.sh")
    if not os.path.exists(env_file):
        reason = "S3 server not started (run `make objectstore`, or `make test`)"
        unavailable = os.path.join(OBJECTSTORE_DIR, "unavailable")
        if os.path.exists(unavailable):
            with open(unavailable, encoding="utf-8") as fh:
                reason = "S3 server could not be installed: " + fh.read().strip()
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with open(env_file, encoding="utf-8") as fh:
        return dict(re.findall(r"^export (\w+)=(.*)$", fh.read(), re.M))


def use_objectstore(monkeypatch) -> str:
    """Point this process at the S3 server; returns a fresh s3:// prefix for one test."""
    env = objectstore_env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return f"s3://{env['BIGTRAIN_S3_BUCKET']}/tests/{uuid.uuid4().hex[:12]}"
