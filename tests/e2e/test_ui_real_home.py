"""`bigtrain ui` on a REAL pipeline home (issue 22's "done when"): the Flask app over the shared
e2e home (the first run pushed a model with variants; the identical re-run is served from TFX's
cache), every page fetched with the test client: runs, a run, its log, its training curves
(drawn from the Trainer's TF2 tensor summaries), models, a diff of two runs and every artifact.
All answer 200, and the home is byte-for-byte and mtime-for-mtime unchanged afterwards."""

import glob
import hashlib
import os
import re

import pytest

pytestmark = pytest.mark.slow


def _home_state(home: str) -> dict:
    """path -> (size, mtime_ns) of every file under home, plus metadata.sqlite's sha256."""
    state = {}
    for folder, _, files in os.walk(home):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                info = os.stat(path)
                state[path] = (info.st_size, info.st_mtime_ns)
    with open(os.path.join(home, "metadata.sqlite"), "rb") as fh:
        state["sha256(metadata.sqlite)"] = hashlib.sha256(fh.read()).hexdigest()
    return state


def _logged_tags(model_run_dir: str) -> set[str]:
    """The independent reference for the curves: TensorFlow's own event reader (the app reads
    with tensorboard's EventAccumulator)."""
    import tensorflow as tf
    tags = set()
    for path in glob.glob(os.path.join(model_run_dir, "**", "*.tfevents.*"), recursive=True):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    return tags


def test_every_page_of_a_real_home_answers_and_writes_nothing(identical_run, data_run):
    """Catches a page that breaks on a real store (types, properties or URIs the synthetic store
    lacks: resolver/importer executions, cached stages, TF2 tensor summaries read as
    simple_value), a curve missing, or any page writing into the home."""
    from pipeline.lineage import queries
    from benchmarks.support.mlmd import connect
    from pipeline.lineage.store import Lineage
    from pipeline.lineage.web.app import create_app
    from runners.local.home import readable_folders
    from pipeline.lineage.web.curves import CURVES

    home = data_run.home
    before = _home_state(home)
    lin = Lineage(connect(data_run.metadata_path))
    client = create_app(lambda: Lineage(connect(data_run.metadata_path)),
                        readable_folders(home)).test_client()

    def page(url: str) -> str:
        response = client.get(url)
        assert response.status_code == 200, (url, response.get_data(as_text=True)[:2000])
        return response.get_data(as_text=True)

    runs_html = page("/")
    for summary in queries.list_runs(lin, limit=None):
        assert f'>{summary["run_id"]}<' in runs_html
    run_html = page(f"/run/{data_run.run_id}")
    assert "Trainer (complete)" in run_html and "Pusher" in run_html
    assert "cached" in page(f"/run/{identical_run.run_id}")
    assert page(f"/run/{data_run.run_id}/log").strip()

    model_run = data_run.report().stage("Trainer").outputs["ModelRun"]["uri"]
    logged = _logged_tags(model_run)
    curves_html = page(f"/run/{data_run.run_id}/curves")
    expected = [title for tag, title in CURVES if tag in logged]
    assert {"loss", "validation_loss", "learning_rate", "tokens_per_second"} <= logged
    assert re.findall(r"<figcaption>([^<]*)</figcaption>", curves_html) == expected
    assert curves_html.count("<svg") == len(expected)

    models_html = page("/models")
    assert 'class="pushed"' in models_html and "int8" in models_html  # pushed model, variants
    diff_html = page(f"/diff?a={data_run.run_id}&b={identical_run.run_id}")
    assert "data unchanged" in diff_html

    artifacts = lin.store.get_artifacts()
    types = {lin.artifact_type(a) for a in artifacts}
    assert {"Examples", "Model", "ModelRun", "ModelEvaluation", "ModelBlessing", "PushedModel"} <= types, types
    for artifact in artifacts:
        assert f"#{artifact.id}</h1>" in page(f"/artifact/{artifact.id}")
    assert _home_state(home) == before
