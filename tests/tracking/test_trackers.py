"""The trackers against real stores: MLflow's sqlite:/// store read back with MlflowClient,
W&B's offline files read back with W&B's own reader (tests/support/wandb_offline.py); the
fan-out's named warning and named error on a tracker that cannot be reached (a closed port)."""

from __future__ import annotations

import os
import socket

import psutil
import pytest

from components.common.errors import EXIT_TRACKER, TrackingError
from components.config.tracking import TrackingConfig, resolved
from components.tracking import RUN_TAG
from components.tracking.fanout import Trackers, TrackerUnavailable
from components.tracking.wandb_tracker import PHASES
from tests.support.wandb_offline import read_run

RUN_ID = "20261127T120000.123456"
IDENTITY = {"run_id": RUN_ID, "pipeline_name": "bigtrain"}
STEPS = {10: {"loss": 3.5, "learning_rate": 1e-3}, 20: {"loss": 2.25, "learning_rate": 5e-4}}


def settings(tmp_path, **overrides) -> dict:
    config = TrackingConfig(**{"backends": ("tensorboard", "mlflow", "wandb"), **overrides})
    return resolved(config, str(tmp_path))


def one_run(s: dict, params: dict | None = None) -> dict:
    """The three phases of a bigtrain run: start, the Trainer's steps, the final figures."""
    start = Trackers.from_settings(s, dict(IDENTITY, phase=PHASES[0]))
    start.start(params or {"train": {"train_steps": 20}}, {})
    start.finish(None)
    trainer = Trackers.from_settings(s, dict(IDENTITY, phase=PHASES[1]))
    trainer.start(None, {})
    for step, figures in STEPS.items():
        trainer.log_step(step, figures)
    trainer.finish(None)
    end = Trackers.from_settings(s, dict(IDENTITY, phase=PHASES[2]))
    end.start(None, {})
    end.log_final({"final.eval_loss": 2.5, "final.blessed": 1.0}, {"bigtrain.mlmd_run_context_id": 7})
    ids = end.ids()
    end.finish("FINISHED")
    return ids


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_mlflow_holds_one_run_with_the_params_steps_and_final_figures(tmp_path):
    from mlflow.tracking import MlflowClient
    s = settings(tmp_path, backends=("mlflow",))
    ids = one_run(s)
    client = MlflowClient(tracking_uri=s["mlflow_uri"])
    experiment = client.get_experiment_by_name("bigtrain")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == [ids["mlflow"]]   # three phases, one run
    run = runs[0]
    assert run.data.tags[RUN_TAG] == RUN_ID and run.data.tags["bigtrain.pipeline"] == "bigtrain"
    assert run.data.tags["bigtrain.mlmd_run_context_id"] == "7"
    assert run.data.params == {"train.train_steps": "20"}
    assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss")} \
        == {10: 3.5, 20: 2.25}
    assert run.data.metrics["final.eval_loss"] == 2.5
    assert run.info.status == "FINISHED"


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_wandb_offline_holds_the_same_series_and_final_figures(tmp_path):
    s = settings(tmp_path, backends=("wandb",))
    ids = one_run(s)
    read = read_run(s["wandb_dir"], ids["wandb"])
    assert read["phases"] == 3
    # Each phase its own folder, whatever the clock: two phases in one second (the folder's
    # time) would otherwise share it, the later's records replacing the earlier's.
    folders = sorted(p.name for p in (tmp_path / "wandb" / "wandb").glob(f"offline-run-*-{ids['wandb']}*"))
    assert [f.rsplit(ids["wandb"] + "-", 1)[-1] for f in folders] == list(PHASES)
    assert read["history"]["loss"] == {10: 3.5, 20: 2.25}
    assert read["history"]["learning_rate"] == {10: 1e-3, 20: 5e-4}
    assert read["summary"]["final.eval_loss"] == 2.5
    assert read["config"]["train"] == {"train_steps": 20}
    assert read["config"]["bigtrain"][RUN_TAG] == RUN_ID
    assert read["config"]["bigtrain"]["bigtrain.mlmd_run_context_id"] == "7"


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_a_finished_wandb_tracker_leaves_no_process_behind(tmp_path):
    """wandb.init starts a `wandb-core` child that run.finish leaves running: the tracker stops it
    (caught when left: a later test counting its own child processes found it)."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    one_run(settings(tmp_path, backends=("wandb",)))
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert [p.name() for p in left if p.is_running()] == []


def test_an_unreachable_mlflow_is_a_named_warning_and_the_others_go_on(tmp_path):
    s = settings(tmp_path, backends=("mlflow", "wandb"),
                 mlflow_uri=f"http://127.0.0.1:{closed_port()}")
    trackers = Trackers.from_settings(s, IDENTITY)
    with pytest.warns(TrackerUnavailable, match=r"tracking.backends: mlflow at http://127.0.0.1:\d+"):
        trackers.start({"a": 1}, {})
    assert [t.name for t in trackers.live] == ["wandb"] and "mlflow" in trackers.lost
    trackers.log_step(1, {"loss": 1.0})     # the lost tracker is not called again
    trackers.finish("FINISHED")


def test_an_unreachable_mlflow_with_tracking_required_is_a_named_error(tmp_path):
    s = settings(tmp_path, backends=("mlflow",), required=True,
                 mlflow_uri=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(TrackingError, match="tracking.required is set") as caught:
        Trackers.from_settings(s, IDENTITY).start({}, {})
    assert caught.value.exit_code == EXIT_TRACKER == 10


def test_the_default_imports_neither_tracker(tmp_path):
    trackers = Trackers.from_settings(resolved(TrackingConfig(), str(tmp_path)), IDENTITY)
    assert not trackers and trackers.tensorboard
    assert Trackers.from_settings(None, IDENTITY).live == []


def test_the_mlflow_server_holds_the_run_read_back_with_mlflow_client(tmp_path):
    """The real tracking server of `make mlflow` (its own venv), over HTTP."""
    from mlflow.tracking import MlflowClient
    from tests.support.mlflow_server import mlflow_server_uri
    uri = mlflow_server_uri()
    experiment = f"tests-{tmp_path.name}-{os.getpid()}"
    s = settings(tmp_path, backends=("mlflow",), mlflow_uri=uri, mlflow_experiment=experiment)
    ids = one_run(s)
    run = MlflowClient(tracking_uri=uri).get_run(ids["mlflow"])
    assert run.data.tags[RUN_TAG] == RUN_ID and run.data.metrics["final.eval_loss"] == 2.5
    assert {m.step: m.value for m in MlflowClient(tracking_uri=uri).get_metric_history(
        run.info.run_id, "loss")} == {10: 3.5, 20: 2.25}
