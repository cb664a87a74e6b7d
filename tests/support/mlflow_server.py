"""The MLflow tracking server `make mlflow` starts (tests/support/mlflow.sh): its URI, or a skip
naming why it is absent (in CI, where it must be there, a failure instead)."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLFLOW_DIR = os.environ.get("BIGTRAIN_MLFLOW_DIR", os.path.join(ROOT, "build", "mlflow"))


def mlflow_server_uri() -> str:
    """BIGTRAIN_MLFLOW_URI of build/mlflow/env.sh, or skip (fail in CI) naming the reason."""
    env_file = os.path.join(MLFLOW_DIR, "env.sh")
    if not os.path.exists(env_file):
        reason = "MLflow server not started (run `make mlflow`, or `make test`)"
        unavailable = os.path.join(MLFLOW_DIR, "unavailable")
        if os.path.exists(unavailable):
            with open(unavailable, encoding="utf-8") as fh:
                reason = "MLflow server could not be installed: " + fh.read().strip()
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with open(env_file, encoding="utf-8") as fh:
        return dict(re.findall(r"^export (\w+)=(.*)$", fh.read(), re.M))["BIGTRAIN_MLFLOW_URI"]
