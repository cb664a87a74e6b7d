"""`bigtrain run`'s two tracking phases (components/tracking tells the stream): before the
pipeline, the tracker run with the resolved config as params (tracking.required and a tracker
that cannot be reached: TrackingError, exit 10, before anything trains); after it, the final
figures of the report's Model, ModelEvaluation, ModelBlessing and PushedModel, the pushed version,
every output's URI and MLMD id (by reference), copies of the outputs tracking.copy_artifacts
names, the run's MLMD context id and its outcome; then the tracker run ids on the run's MLMD
context (`bigtrain lineage runs`, the UI)."""

from __future__ import annotations

import json
import logging
import numbers
import os

from components import config as config_lib
from components.storage import fs
from components.common.errors import ObjectStoreError
from components.config.tracking import resolved
from components.push.properties import PUSHED_DESTINATION
from components.tracking import EXTERNAL

FINAL_KINDS = ("Model", "ModelEvaluation", "ModelBlessing", "PushedModel")
MLMD_RUN_TAG = "bigtrain.mlmd_run_context_id"
LOGGER = logging.getLogger("bigtrain.tracking")
COPY_STAGING = ".tracking-copies"   # <home>/.tracking-copies/<run id>/: outputs on an object store


def tracking_settings(config: config_lib.Config) -> dict | None:
    """The resolved tracking section when a tracker besides TensorBoard is on, else None."""
    if not any(name in EXTERNAL for name in config.tracking.backends):
        return None
    return resolved(config.tracking, config.paths.home)


def _trackers(config: config_lib.Config, run_id: str, phase: str):
    from components.tracking.fanout import Trackers
    identity = {"run_id": run_id, "pipeline_name": config.paths.pipeline_name, "phase": phase}
    return Trackers.from_settings(tracking_settings(config), identity)


def start_tracking(config: config_lib.Config, run_id: str) -> None:
    """Phase 1: create the tracker run, the resolved config as its params."""
    if tracking_settings(config) is None:
        return
    from components.tracking.wandb_tracker import PHASES
    trackers = _trackers(config, run_id, PHASES[0])
    trackers.start(config_lib.to_dict(config), {})
    trackers.finish(None)


def final_stream(report) -> tuple[dict, dict]:
    """(figures, tags) of a run report: final.<stage>.<property> for the numeric properties of
    FINAL_KINDS; tags: the pushed version, every output's URI and MLMD id."""
    figures, tags = {}, {}
    for stage in report.stages:
        for kind, props in stage.outputs.items():
            tags[f"bigtrain.artifact.{stage.node}.{kind}"] = props.get("uri", "")
            tags[f"bigtrain.mlmd.{stage.node}.{kind}"] = props.get("id", "")
            if kind not in FINAL_KINDS:
                continue
            for name, value in props.items():
                if name != "id" and isinstance(value, numbers.Real) and not isinstance(value, bool):
                    figures[f"final.{stage.node}.{name}"] = float(value)
            if kind == "PushedModel" and props.get("pushed") == 1:
                tags["bigtrain.pushed_version"] = props.get("pushed_version", "")
    return figures, tags


def copied_folders(report, names: list[str]) -> list[tuple[str, str]]:
    """(name, folder) of each output in tracking.copy_artifacts this run has: the artifact's URI,
    for PushedModel the served version folder (a model that was not pushed has none)."""
    folders = []
    for name in names:
        props = report.output(name)
        folder = props.get(PUSHED_DESTINATION) if name == "PushedModel" else props.get("uri")
        if folder and (name != "PushedModel" or props.get("pushed") == 1):
            folders.append((name, folder))
    return folders


def copy_outputs(trackers, report, names: list[str], staging: str) -> None:
    """Each copied output into every tracker; one on an object store is first copied to a local
    `staging` folder (the trackers' clients upload local files), removed afterwards."""
    for name, folder in copied_folders(report, names):
        local = folder
        if fs.is_remote(folder):
            local = os.path.join(staging, name)
            try:
                fs.copytree(folder, local)
            except ObjectStoreError as err:   # the run is done: its trackers keep the URI only
                fs.rmtree(local)
                LOGGER.warning("tracking.copy_artifacts: %s not copied (%s); the tracker runs "
                               "hold its URI only", name, err)
                continue
        try:
            trackers.copy_folder(name, local)
        finally:
            if local != folder:
                fs.rmtree(local)
    for folder in (staging, os.path.dirname(staging)):   # the run's, then COPY_STAGING if empty
        if os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)


def tracker_stores(settings: dict, ids: dict) -> list[tuple[str, str, str]]:
    """(backend, its run id, where it wrote: the store or folder and where that came from, e.g.
    `sqlite:///h/mlflow.db (default)`, `http://mlflow:5000 ($MLFLOW_TRACKING_URI)`)."""
    places = {"mlflow": "mlflow_uri", "wandb": "wandb_dir"}
    out = []
    for name, run in sorted(ids.items()):
        key = places[name]
        source = settings.get("sources", {}).get(key, "config")
        out.append((name, run, f"{settings[key]} ({source})"))
    return out


def finish_tracking(config: config_lib.Config, store, run_context, error, report) -> dict:
    """Phase 3, after the run's context is recorded and its report (pipeline/lineage/report.py
    run_report) printed: the final stream from that report, the run ended FINISHED or FAILED,
    and the tracker run ids recorded on the context. Returns those ids."""
    if tracking_settings(config) is None or run_context is None:
        return {}
    from components.tracking.wandb_tracker import PHASES
    from pipeline.lineage import record
    figures, tags = final_stream(report)
    tags.update({MLMD_RUN_TAG: run_context.id, "bigtrain.outcome": "failed" if error else "complete"})
    trackers = _trackers(config, run_context.name, PHASES[2])
    trackers.start(None, {})
    trackers.log_final(figures, tags)
    copy_outputs(trackers, report, list(config.tracking.copy_artifacts),
                 os.path.join(config.paths.home, COPY_STAGING, run_context.name))
    ids = trackers.ids()
    trackers.finish("FAILED" if error is not None else "FINISHED")
    if ids:
        run_context.custom_properties[record.RUN_TRACKERS].string_value = json.dumps(ids, sort_keys=True)
        store.put_contexts([run_context])
        print("tracker runs: " + ", ".join(f"{k} {v} in {store}" for k, v, store in
                                           tracker_stores(tracking_settings(config), ids)),
              flush=True)
    return ids
