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
# The environment variable each empty setting reads, as MLflow's and W&B's clients (and Hugging
# Face's and Lightning's callbacks) do, so a team's shell or cluster sets it once.
ENVIRONMENT = {"mlflow_uri": "MLFLOW_TRACKING_URI", "mlflow_experiment": "MLFLOW_EXPERIMENT_NAME",
               "wandb_dir": "WANDB_DIR", "wandb_mode": "WANDB_MODE",
               "wandb_project": "WANDB_PROJECT"}
# What an empty setting with its variable unset becomes (the places: under the home, resolved()).
DEFAULTS = {"mlflow_experiment": "bigtrain", "wandb_mode": "offline", "wandb_project": "bigtrain"}


@dataclass(frozen=True)
class TrackingConfig:
    # Any of tensorboard, mlflow, wandb (each at most once). Without tensorboard the Trainer
    # writes no event files (the UI's curves page then has none to draw).
    backends: tuple[str, ...] = ("tensorboard",)
    # A tracker that cannot be reached: false, a named warning (TrackerUnavailable) and the run
    # goes on without it; true, a named error (TrackingError, exit 10) before anything trains.
    required: bool = False
    # Each empty place or name below follows its ecosystem's convention (ENVIRONMENT: what MLflow's
    # and W&B's own clients read), then bigtrain's default (DEFAULTS); a value set here wins.
    # A tracking server (http://host:port) or a store (sqlite:///path, a folder). Empty:
    # $MLFLOW_TRACKING_URI, else sqlite:///<home>/mlflow.db.
    mlflow_uri: str = ""
    mlflow_experiment: str = ""
    # W&B's folder (its offline runs: <wandb_dir>/wandb/offline-run-*; upload with `wandb sync`).
    # Empty: $WANDB_DIR, else <home>/wandb.
    wandb_dir: str = ""
    wandb_mode: str = ""
    wandb_project: str = ""
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
    mode, source = chosen(tracking, "wandb_mode")
    if mode not in WANDB_MODES:
        where = "tracking.wandb_mode" if source == "config" else f"{source} (tracking.wandb_mode empty)"
        raise error(f"{where}: {mode!r} is not one of {WANDB_MODES}")
    for name in tracking.copy_artifacts:
        if name not in COPYABLE:
            raise error(f"tracking.copy_artifacts: {name!r} is not one of {COPYABLE}")
    if len(set(tracking.copy_artifacts)) != len(tracking.copy_artifacts):
        raise error(f"tracking.copy_artifacts: {list(tracking.copy_artifacts)} names an output twice")
    for key in ("mlflow_experiment", "wandb_project"):
        value = getattr(tracking, key)
        if value and not value.strip():
            raise error(f"tracking.{key}: must not be blank (empty: ${ENVIRONMENT[key]}, "
                        f"else {DEFAULTS[key]!r})")


def chosen(tracking: TrackingConfig, key: str, environ=os.environ) -> tuple[str, str]:
    """(value, where it came from) of one setting: the config when set, else its ecosystem's
    variable when set, else "" (the caller's default): "config", "$NAME" or "default"."""
    if getattr(tracking, key):
        return getattr(tracking, key), "config"
    variable = ENVIRONMENT[key]
    if environ.get(variable, "").strip():
        return environ[variable].strip(), "$" + variable
    return DEFAULTS.get(key, ""), "default"


def resolved(tracking: TrackingConfig, home: str, environ=os.environ) -> dict:
    """The section as the trackers use it: each empty setting from its ecosystem's variable
    (ENVIRONMENT), else bigtrain's default, places under the (absolute) home; `sources` names
    where each came from (the report says which store each tracker wrote to)."""
    home = os.path.abspath(home)
    values = {key: chosen(tracking, key, environ) for key in ENVIRONMENT}
    mlflow_uri = values["mlflow_uri"][0] or "sqlite:///" + os.path.join(home, MLFLOW_DB)
    return {"backends": list(tracking.backends), "required": tracking.required,
            "mlflow_uri": mlflow_uri, "mlflow_experiment": values["mlflow_experiment"][0],
            "wandb_dir": os.path.abspath(values["wandb_dir"][0] or os.path.join(home, WANDB_DIR)),
            "wandb_mode": values["wandb_mode"][0], "wandb_project": values["wandb_project"][0],
            "copy_artifacts": list(tracking.copy_artifacts),
            "sources": {key: where for key, (_, where) in values.items()}}
