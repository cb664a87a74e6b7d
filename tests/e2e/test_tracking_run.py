"""A small real `bigtrain run` with every tracker on (tracking.backends=[tensorboard,mlflow,wandb])
against the real MLflow server of `make mlflow` and W&B offline: the server's run holds the
same final figures as the MLMD the report reads, its step series and W&B's offline series equal
the TensorBoard scalars, the tracker ids are on the run's MLMD context, in `bigtrain lineage
runs` and on the UI. Then the same home with MLflow at a closed port (a named warning, a
complete run) and with tracking.required (the named error, exit 10, before anything runs)."""

from __future__ import annotations

import glob
import math
import os
import socket

import pytest

from components.common.errors import EXIT_TRACKER
from tests.e2e.conftest import SMALL_RUN
from tests.support.pipeline_run import lineage_text, run_cli
from tests.support.mlflow_server import mlflow_server_uri
from tests.support.openlineage_spec import Receiver, check_run_event, stage_events
from tests.support.wandb_offline import read_run

pytestmark = pytest.mark.slow


def _tiny_corpus(root: str) -> None:
    import random
    rng = random.Random(0)
    words = "def return class import for while if else print self value data model train".split()
    for i in range(8):
        os.makedirs(f"{root}/{'ab'[i % 2]}", exist_ok=True)
        with open(f"{root}/{'ab'[i % 2]}/f{i}.py", "w", encoding="utf-8") as fh:
            fh.write("".join(" ".join(rng.choice(words) for _ in range(8)) + "\n" for _ in range(120)))


def small_args(corpus: str) -> list[str]:
    """SMALL_RUN, validating every 5 steps (the validation figures are tracked too)."""
    return ["--set", f"data.input={corpus}", *SMALL_RUN, "--set", "train.eval_every=5"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, session_capsys):
    """Issue 42's "done when" in one run: every tracker on, OpenLineage's HTTP transport pointed
    at a receiver on 127.0.0.1."""
    uri = mlflow_server_uri()
    home = str(tmp_path_factory.mktemp("trackhome"))
    corpus = os.path.join(home, "corpus")
    _tiny_corpus(corpus)
    experiment = f"e2e-{os.path.basename(home)}-{os.getpid()}"
    receiver, monkeypatch = Receiver(), pytest.MonkeyPatch()
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    monkeypatch.delenv("OPENLINEAGE_DISABLED", raising=False)
    monkeypatch.delenv("OPENLINEAGE_CONFIG", raising=False)
    try:
        run = run_cli(session_capsys, home, *small_args(corpus),
                      "--set", "tracking.backends=[tensorboard,mlflow,wandb]",
                      "--set", f"tracking.mlflow_uri={uri}",
                      "--set", f"tracking.mlflow_experiment={experiment}",
                      "--set", "tracking.copy_artifacts=[PushedModel]")
    finally:
        monkeypatch.undo()
        receiver.close()
    run.uri, run.corpus = uri, corpus
    run.lineage_events = [body for _, body in receiver.events]
    return run


def tensorboard_series(run, tag: str) -> dict[int, float]:
    """The Trainer's TensorBoard scalars `tag` of this run (its ModelRun folder)."""
    import tensorflow as tf
    series = {}
    model_run = run.report().output("ModelRun")["uri"]
    for path in glob.glob(os.path.join(model_run, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    series[event.step] = float(tf.make_ndarray(value.tensor))
    return series


def close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-6) for k in a)


def tracker_ids(run) -> dict:
    from pipeline.lineage.queries import trackers_of
    from pipeline.lineage.store import properties
    context = next(c for c in run.store().get_contexts_by_type("pipeline_run") if c.name == run.run_id)
    return trackers_of(properties(context))


def test_the_mlflow_server_holds_the_reports_final_figures_and_the_step_series(tracked):
    from mlflow.tracking import MlflowClient
    assert tracked.exit_code == 0, tracked.stdout + tracked.stderr
    ids = tracker_ids(tracked)
    assert set(ids) == {"mlflow", "wandb"}, tracked.stdout
    client = MlflowClient(tracking_uri=tracked.uri)
    run = client.get_run(ids["mlflow"])
    assert run.data.tags["bigtrain.run_id"] == tracked.run_id and run.info.status == "FINISHED"
    model = tracked.report().output("Model")
    assert run.data.metrics["final.Trainer.eval_loss"] == model["eval_loss"]
    assert run.data.metrics["final.Trainer.final_loss"] == model["final_loss"]
    assert run.data.params["train.train_steps"] == "10"
    assert run.data.tags["bigtrain.artifact.Trainer.Model"] == model["uri"]
    for tag in ("loss", "learning_rate", "validation_loss"):
        mlflow_series = {m.step: m.value for m in client.get_metric_history(run.info.run_id, tag)}
        assert close(mlflow_series, tensorboard_series(tracked, tag)), tag


def test_wandbs_offline_run_holds_the_same_series_as_tensorboard(tracked):
    read = read_run(os.path.join(tracked.home, "wandb"), tracker_ids(tracked)["wandb"])
    for tag in ("loss", "gradient_norm", "validation_loss"):
        assert close(read["history"][tag], tensorboard_series(tracked, tag)), tag
    model = tracked.report().output("Model")
    assert read["summary"]["final.Trainer.eval_loss"] == model["eval_loss"]


def test_both_trackers_hold_a_copy_of_the_served_version(tracked, tmp_path):
    """tracking.copy_artifacts=[PushedModel]: the served version folder's files, byte for byte in
    the MLflow server's artifacts, by MD5 in W&B's offline manifest (against hashlib)."""
    import base64
    import hashlib
    from mlflow.tracking import MlflowClient
    served = tracked.report().output("PushedModel")["pushed_destination"]
    files = {os.path.relpath(os.path.join(d, n), served): open(os.path.join(d, n), "rb").read()
             for d, _, names in os.walk(served) for n in names}
    assert "saved_model.pb" in files
    ids = tracker_ids(tracked)
    got = MlflowClient(tracking_uri=tracked.uri).download_artifacts(
        ids["mlflow"], "PushedModel", str(tmp_path))
    assert {os.path.relpath(os.path.join(d, n), got): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(got) for n in names} == files
    from tests.support.wandb_offline import records
    (artifact,) = [r.artifact for kind, r in records(os.path.join(tracked.home, "wandb"), ids["wandb"])
                   if kind == "artifact"]
    assert {e.path: e.digest for e in artifact.manifest.contents} == {
        rel: base64.b64encode(hashlib.md5(data).digest()).decode() for rel, data in files.items()}


def test_one_run_id_in_mlflow_wandb_and_openlineage(tracked):
    """The bigtrain run id names the MLflow run (tag), the W&B run (its id) and the OpenLineage
    parent run (a UUID derived from it) of one and the same run, whose every stage sent START and
    COMPLETE; the Trainer's OpenLineage figures are the MLflow run's final figures."""
    from mlflow.tracking import MlflowClient
    from components.tracking.wandb_tracker import wandb_run_id
    from pipeline.lineage import openlineage_events as ol
    ids = tracker_ids(tracked)
    mlflow_run = MlflowClient(tracking_uri=tracked.uri).get_run(ids["mlflow"])
    assert mlflow_run.data.tags["bigtrain.run_id"] == tracked.run_id
    assert ids["wandb"] == wandb_run_id(tracked.run_id)
    for event in tracked.lineage_events:
        check_run_event(event)
    parent = [e for e in tracked.lineage_events if e["job"]["name"] == "bigtrain"]
    assert [e["eventType"] for e in parent] == ["START", "COMPLETE"]
    assert {e["run"]["runId"] for e in parent} == {ol.run_uuid(ol.RunRecord(tracked.run_id, "bigtrain"))}
    by_stage = stage_events(tracked.lineage_events, tracked.run_id)
    stages = {s for s in tracked.states() if not s.endswith("resolver")}
    assert {k: [e["eventType"] for e in v] for k, v in by_stage.items()} == {
        s: ["START", "COMPLETE"] for s in stages}
    figures = by_stage["Trainer"][-1]["run"]["facets"]["bigtrain"]["figures"]
    assert figures["eval_loss"] == mlflow_run.data.metrics["final.Trainer.eval_loss"]


def test_the_tracker_ids_are_in_lineage_runs_trace_and_on_the_ui(tracked, session_capsys):
    ids = tracker_ids(tracked)
    text = lineage_text(session_capsys, tracked.home, "runs")
    assert f"mlflow:{ids['mlflow']}" in text and f"wandb:{ids['wandb']}" in text, text
    model_id = str(tracked.report().output("Model")["id"])
    trace = lineage_text(session_capsys, tracked.home, "trace", model_id)
    assert (f"made in run {tracked.run_id}, tracker runs: mlflow:{ids['mlflow']} "
            f"wandb:{ids['wandb']}") in trace, trace
    from benchmarks.support.mlmd import connect
    from pipeline.lineage.store import Lineage
    from pipeline.lineage.web.app import create_app
    from runners.local.home import readable_folders
    client = create_app(lambda: Lineage(connect(tracked.metadata_path)),
                        readable_folders(tracked.home)).test_client()
    page = client.get(f"/run/{tracked.run_id}").get_data(as_text=True)
    assert ids["mlflow"] in page and ids["wandb"] in page
    assert ids["mlflow"] in client.get("/").get_data(as_text=True)


def test_an_unreachable_mlflow_is_a_named_warning_and_the_run_completes(tracked, session_capsys):
    down = f"http://127.0.0.1:{closed_port()}"
    run = run_cli(session_capsys, tracked.home, *small_args(tracked.corpus), "--force",
                  "--set", "tracking.backends=[tensorboard,mlflow]",
                  "--set", f"tracking.mlflow_uri={down}")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert f"TrackerUnavailable: tracking.backends: mlflow at {down} cannot be reached" in run.stdout
    assert "run COMPLETE" in run.stdout
    assert tracker_ids(run) == {}


def test_an_unreachable_mlflow_with_tracking_required_is_exit_10(tracked, session_capsys):
    down = f"http://127.0.0.1:{closed_port()}"
    run = run_cli(session_capsys, tracked.home, *small_args(tracked.corpus), "--force",
                  "--set", "tracking.backends=[tensorboard,mlflow]", "--set", "tracking.required=true",
                  "--set", f"tracking.mlflow_uri={down}")
    assert run.exit_code == EXIT_TRACKER, run.stdout + run.stderr
    assert f"mlflow at {down} cannot be reached" in run.stderr
    assert "tracking.required is set" in run.stderr
