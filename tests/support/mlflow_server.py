"""The MLflow tracking server `make mlflow` starts (tests/support/mlflow.sh): its URI, or a skip
naming why it is absent (in CI, where it must be there, a failure instead)."""

from __future__ import annotations

import os

from tests.support.services import ROOT, service_env

MLFLOW_DIR = os.environ.get("BIGTRAIN_MLFLOW_DIR", os.path.join(ROOT, "build", "mlflow"))


def mlflow_server_uri() -> str:
    """BIGTRAIN_MLFLOW_URI of build/mlflow/env.sh, or skip (fail in CI) naming the reason."""
    return service_env(MLFLOW_DIR, "MLflow server", "mlflow")["BIGTRAIN_MLFLOW_URI"]
