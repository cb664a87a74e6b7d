"""tracking.copy_artifacts: the named outputs' files copied into each tracker run, read back with
the trackers' own clients (MLflow's MlflowClient, W&B's offline record reader) and compared with
the files on disk byte for byte (MLflow) and by MD5 (W&B's manifest, against hashlib). Nothing lands
outside the home: MLflow's sqlite store keeps its copies beside the database, W&B its cache, logs
and staged copies under its folder. The e2e run of tests/e2e/test_tracking_run.py copies a real
served version into the MLflow server."""

from __future__ import annotations

import base64
import hashlib
import os
from types import SimpleNamespace

import pytest

from components.config import ConfigError
from components.config.tracking import MLFLOW_ARTIFACTS, TrackingConfig, resolved, validate_tracking
from components.tracking.fanout import Trackers
from components.tracking.wandb_tracker import PHASES, PLACES
from runners.local.tracking import COPY_STAGING, copied_folders, copy_outputs
from tests.support.wandb_offline import records

RUN_ID = "20261128T110000.000001"
FILES = {"saved_model.pb": b"\x08\x01graph", "variables/variables.index": b"index",
         "assets/vocab.txt": "ä\n".encode()}


def a_folder(root) -> str:
    for rel, data in FILES.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as fh:
            fh.write(data)
    return str(root)


def final_phase(home, backend: str) -> Trackers:
    s = resolved(TrackingConfig(backends=(backend,), copy_artifacts=("PushedModel",)), str(home))
    trackers = Trackers.from_settings(s, {"run_id": RUN_ID, "pipeline_name": "bigtrain",
                                          "phase": PHASES[2]})
    trackers.start(None, {})
    return trackers


def files_under(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names}


def test_mlflow_keeps_the_copies_beside_its_sqlite_store(tmp_path, monkeypatch):
    """Caught: an experiment created without artifact_location (MLflow then writes ./mlruns under
    the working directory: outside the home), a copy under another name."""
    from mlflow.tracking import MlflowClient
    home, elsewhere = tmp_path / "home", tmp_path / "cwd"
    home.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    trackers = final_phase(home, "mlflow")
    trackers.copy_folder("PushedModel", a_folder(tmp_path / "served" / "7"))
    (run_id,) = trackers.ids().values()
    trackers.finish("FINISHED")
    assert files_under(elsewhere) == set()
    client = MlflowClient(tracking_uri=f"sqlite:///{home}/mlflow.db")
    got = client.download_artifacts(run_id, "PushedModel", str(tmp_path / "download"))
    for rel, data in FILES.items():
        with open(os.path.join(got, rel), "rb") as fh:
            assert fh.read() == data, rel
    kept = files_under(home / MLFLOW_ARTIFACTS)
    assert {k.split("PushedModel/", 1)[1] for k in kept} == set(FILES)


def test_wandb_offline_holds_one_artifact_with_every_file_staged_under_its_folder(tmp_path):
    """Caught: a copy staged in ~/.local/share/wandb (W&B's default), an environment left
    pointing at this home afterwards, a file missing from the manifest."""
    before = {key: os.environ.get(key) for key in PLACES}
    trackers = final_phase(tmp_path / "home", "wandb")
    trackers.copy_folder("PushedModel", a_folder(tmp_path / "served" / "7"))
    (run_id,) = trackers.ids().values()
    trackers.finish("FINISHED")
    assert {key: os.environ.get(key) for key in PLACES} == before
    (artifact,) = [r.artifact for kind, r in records(str(tmp_path / "home" / "wandb"), run_id)
                   if kind == "artifact"]
    assert artifact.name == f"{run_id}-PushedModel" and artifact.type == "model"
    manifest = {e.path: (e.digest, e.size, e.local_path) for e in artifact.manifest.contents}
    assert set(manifest) == set(FILES)
    for rel, data in FILES.items():
        digest, size, staged = manifest[rel]
        assert digest == base64.b64encode(hashlib.md5(data).digest()).decode() and size == len(data)
        assert staged.startswith(str(tmp_path / "home" / "wandb" / PLACES["WANDB_DATA_DIR"]))
        with open(staged, "rb") as fh:
            assert fh.read() == data
    if before["WANDB_CACHE_DIR"] is None:   # W&B's service logs, not in ~/.cache/wandb
        assert files_under(tmp_path / "home" / "wandb" / PLACES["WANDB_CACHE_DIR"])


def report_of(outputs: dict):
    return SimpleNamespace(output=lambda kind: outputs.get(kind, {}))


def test_the_served_folder_is_copied_only_when_pushed():
    """PushedModel's files are the served version folder, not TFX's marker artifact."""
    outputs = {"Model": {"uri": "/root/Trainer/model/5"},
               "PushedModel": {"uri": "/root/Pusher/pushed_model/9", "pushed": 1,
                               "pushed_destination": "/home/serving/gpt/3"}}
    assert copied_folders(report_of(outputs), ["PushedModel", "Model", "ModelRun"]) == [
        ("PushedModel", "/home/serving/gpt/3"), ("Model", "/root/Trainer/model/5")]
    outputs["PushedModel"]["pushed"] = 0
    assert copied_folders(report_of(outputs), ["PushedModel"]) == []


def test_an_output_on_an_object_store_is_staged_in_the_home_then_removed(tmp_path):
    """TF's ram:// filesystem stands in for s3:// (the same fs.copytree path for every URI)."""
    import tensorflow as tf
    remote = "ram://bucket/Trainer/model/5"
    for rel, data in FILES.items():
        tf.io.gfile.makedirs(os.path.dirname(f"{remote}/{rel}"))
        with tf.io.gfile.GFile(f"{remote}/{rel}", "wb") as fh:
            fh.write(data)
    seen = {}

    class Recorder:
        def copy_folder(self, name, folder):
            seen[name] = {rel: open(os.path.join(folder, rel), "rb").read() for rel in FILES}
    staging = tmp_path / COPY_STAGING / RUN_ID
    copy_outputs(Recorder(), report_of({"Model": {"uri": remote}}), ["Model"], str(staging))
    assert seen == {"Model": FILES}
    assert not (tmp_path / COPY_STAGING).exists()


def test_an_unreadable_output_is_a_warning_and_the_others_are_copied(tmp_path, monkeypatch, caplog):
    """The run is over when copies are made: a store that fails the read costs that copy (its
    URI stays on the tracker run), not the run's end."""
    from components.storage import fs
    from components.common.errors import ObjectStoreError

    def unreachable(source, destination, skip=()):
        raise ObjectStoreError(f"walk {source} failed: connection refused")
    monkeypatch.setattr(fs, "copytree", unreachable)
    seen = []

    class Recorder:
        def copy_folder(self, name, folder):
            seen.append((name, folder))
    local = a_folder(tmp_path / "served" / "3")
    report = report_of({"Model": {"uri": "s3://bucket/Trainer/model/5"},
                        "PushedModel": {"pushed": 1, "pushed_destination": local}})
    with caplog.at_level("WARNING", logger="bigtrain.tracking"):
        copy_outputs(Recorder(), report, ["Model", "PushedModel"], str(tmp_path / COPY_STAGING / RUN_ID))
    assert seen == [("PushedModel", local)]
    assert "tracking.copy_artifacts: Model not copied (walk s3://bucket/Trainer/model/5 failed" in caplog.text
    assert not (tmp_path / COPY_STAGING).exists()


@pytest.mark.parametrize("names, message", [
    (("Examples",), "'Examples' is not one of"),
    (("Model", "Model"), "names an output twice")])
def test_copy_artifacts_names_known_outputs_once(names, message):
    with pytest.raises(ConfigError, match=message):
        validate_tracking(TrackingConfig(copy_artifacts=names), ConfigError)
