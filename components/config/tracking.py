"""The tracking section (`tracking`): where a run's figures go besides the console. TensorBoard
(the default) writes the Trainer's event files; MLflow and Weights & Biases receive the same
stream through components/tracking/ (the resolved config as params, every logged step's figures,
the final evaluation, blessing and pushed version, the artifacts' URIs, and copies of the outputs
named in copy_artifacts). tree.py re-exports it."""

from __future__ import annotations

import os
from dataclasses import dataclass

TRACKING_BACKENDS = ("tensorboard", "mlflow", "wandb")
WANDB_MODES = ("offline", "online", "disabled")
MLFLOW_DB = "mlflow.db"        # the default MLflow store of a home: sqlite:///<home>/mlflow.db
WANDB_DIR = "wandb"            # the default W&B folder of a home: <home>/wandb
MLFLOW_ARTIFACTS = "mlflow-artifacts"   # beside a sqlite store: its experiments' copied files
# What tracking.copy_artifacts may name: a run's outputs with files a user keeps beside the
# figures (the SavedModel, the training run's TensorBoard events and checkpoints, the
# evaluation's files, the served version folder).
COPYABLE = ("Model", "ModelRun", "ModelEvaluation", "PushedModel")


@dataclass(frozen=True)
class TrackingConfig:
    # Any of tensorboard, mlflow, wandb (each at most once). Without tensorboard the Trainer
    # writes no event files (the UI's curves page then has none to draw).
    backends: tuple[str, ...] = ("tensorboard",)
    # A tracker that cannot be reached: false, a named warning (TrackerUnavailable) and the run
    # goes on without it; true, a named error (TrackingError, exit 10) before anything trains.
    required: bool = False
    # A tracking server (http://host:port) or a store (sqlite:///path, a folder). Empty:
    # sqlite:///<home>/mlflow.db.
    mlflow_uri: str = ""
    mlflow_experiment: str = "bigtrain"
    # W&B's folder (its offline runs: <wandb_dir>/wandb/offline-run-*; upload with `wandb sync`).
    # Empty: <home>/wandb.
    wandb_dir: str = ""
    wandb_mode: str = "offline"
    wandb_project: str = "bigtrain"
    # Outputs whose files are copied into each tracker run, any of COPYABLE (PushedModel: the
    # served version folder). Empty: none; every output's URI is always sent, by reference.
    copy_artifacts: tuple[str, ...] = ()


def validate_tracking(tracking: TrackingConfig, error: type) -> None:
    """The backends and copied outputs are known names, each once; the W&B mode is one of
    WANDB_MODES."""
    for name in tracking.backends:
        if name not in TRACKING_BACKENDS:
            raise error(f"tracking.backends: {name!r} is not one of {TRACKING_BACKENDS}")
    if len(set(tracking.backends)) != len(tracking.backends):
        raise error(f"tracking.backends: {list(tracking.backends)} names a backend twice")
    if tracking.wandb_mode not in WANDB_MODES:
        raise error(f"tracking.wandb_mode: {tracking.wandb_mode!r} is not one of {WANDB_MODES}")
    for name in tracking.copy_artifacts:
        if name not in COPYABLE:
            raise error(f"tracking.copy_artifacts: {name!r} is not one of {COPYABLE}")
    if len(set(tracking.copy_artifacts)) != len(tracking.copy_artifacts):
        raise error(f"tracking.copy_artifacts: {list(tracking.copy_artifacts)} names an output twice")
    for key in ("mlflow_experiment", "wandb_project"):
        if not getattr(tracking, key).strip():
            raise error(f"tracking.{key}: must not be empty")


def resolved(tracking: TrackingConfig, home: str) -> dict:
    """The section as the trackers use it: empty places resolved under the (absolute) home."""
    home = os.path.abspath(home)
    return {"backends": list(tracking.backends), "required": tracking.required,
            "mlflow_uri": tracking.mlflow_uri or "sqlite:///" + os.path.join(home, MLFLOW_DB),
            "mlflow_experiment": tracking.mlflow_experiment,
            "wandb_dir": os.path.abspath(tracking.wandb_dir or os.path.join(home, WANDB_DIR)),
            "wandb_mode": tracking.wandb_mode, "wandb_project": tracking.wandb_project,
            "copy_artifacts": list(tracking.copy_artifacts)}
