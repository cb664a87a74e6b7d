"""Experiment trackers besides TensorBoard (config section `tracking`): MLflow (mlflow_tracker.py)
and Weights & Biases (wandb_tracker.py), behind one fan-out, `Trackers` (fanout.py).

Each tracker receives the same stream, in up to three phases that each open (create or resume)
the one tracker run of a bigtrain run, found by the bigtrain run id: `bigtrain run` before the
pipeline (the resolved config as params, tags naming the run and pipeline), the Trainer (every
logged step's figures: loss, learning rate, gradient norm, tokens/s, MFU where known,
validation figures), `bigtrain run` after the pipeline (the final evaluation, blessing, pushed
version, the artifacts' URIs, the MLMD ids). The adapters import mlflow / wandb lazily: the
default (TensorBoard only) never imports either.

A tracker that cannot be reached (any exception of its client: a closed port, a timeout, a
folder it cannot write) is dropped for the rest of the phase with a TrackerUnavailable warning
naming it, its place and the cause; with tracking.required it is a TrackingError (exit 10)
instead. Clients are held to short timeouts (MLflow: one HTTP try of at most
MLFLOW_HTTP_REQUEST_TIMEOUT s; W&B offline never reaches the network), so a tracker never
hangs a run and never costs its training."""

from __future__ import annotations

EXTERNAL = ("mlflow", "wandb")   # the backends served here; tensorboard is the Trainer's writer
# Tag names on the tracker run (MLflow tags; W&B config["bigtrain"] keys).
RUN_TAG, PIPELINE_TAG = "bigtrain.run_id", "bigtrain.pipeline"


def flat_params(settings: dict, prefix: str = "") -> dict[str, str]:
    """A nested config dict as dotted keys -> text values (what a tracker's params hold)."""
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(flat_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out
