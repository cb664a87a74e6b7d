"""`bigtrain run` with data.input, orchestrator.pipeline_root and orchestrator.serving_dir on the
S3 server of `make objectstore` (issue 18, item 2), MLMD on sqlite in a local home.

Every stage runs on s3://: TextExampleGen (listing, reading, shards), StatisticsGen, the schema,
ExampleValidator and the gate, the Trainer (checkpoints through tf.train.CheckpointManager,
TensorBoard logs, the Keras export and its variants), the Evaluator and the Pusher. Asserted by
listing the bucket through fs, not by trusting the report. Catches: a stage that writes with
open()/os (a local `s3:` folder appears under the cwd or the home), a local run that ignores the
orchestrator keys (the artifacts land under the home), a push that is half there or not loadable
by TF Serving's loader, an up-to-date check that cannot see remote outputs."""

import os

import numpy as np
import pytest

from components.storage import fs
from runners.cli import app as cli
from tests.support.pipeline_run import run_cli
from tests.support.objectstore import use_objectstore
from tests.support.corpora import _tiny_corpus, s3_args

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3_run(tmp_path_factory, session_capsys):
    monkeypatch = pytest.MonkeyPatch()
    prefix = use_objectstore(monkeypatch)
    home = str(tmp_path_factory.mktemp("s3home"))
    cwd = os.getcwd()
    os.chdir(home)  # a stage that writes to a relative "s3:/..." path would write here
    try:
        _tiny_corpus(f"{prefix}/corpus")
        run = run_cli(session_capsys, home, *s3_args(prefix))
        run.prefix = prefix
        run.rerun = run_cli(session_capsys, home, *s3_args(prefix))
        yield run
    finally:
        os.chdir(cwd)
        fs.rmtree(prefix)
        monkeypatch.undo()


def test_every_stage_writes_into_the_bucket(s3_run):
    assert s3_run.exit_code == 0, s3_run.stdout + s3_run.stderr
    states = s3_run.states()
    for stage in ("TextExampleGen", "StatisticsGen", "CuratedSchemaGen", "ExampleValidator",
                  "AnomaliesGate", "Trainer", "LanguageModelEvaluator", "Pusher"):
        assert states[stage] == "complete", (stage, states)
    root = f"{s3_run.prefix}/root"
    files = list(fs.walk_files(root))
    shards = [f for f in files if f.startswith("TextExampleGen/") and f.endswith(".gz")]
    assert any("/Split-train/" in f for f in shards) and any("/Split-eval/" in f for f in shards), files
    assert any(f.startswith("StatisticsGen/") for f in files)
    assert any(f.startswith("checkpoints/") and f.endswith(".index") for f in files), files
    assert any(f.startswith("Trainer/model/") and f.endswith("/Format-Serving/saved_model.pb")
               for f in files), files
    assert any(f.startswith("Trainer/model_run/") and "tfevents" in f for f in files), files  # TensorBoard
    assert any(f.startswith("LanguageModelEvaluator/evaluation/") for f in files), files
    assert any(f.startswith("LanguageModelEvaluator/") for f in files), files
    pushed = s3_run.report().stage("Pusher").outputs["PushedModel"]
    destination = pushed["pushed_destination"]
    assert destination.startswith(f"{s3_run.prefix}/serving/gpt/"), destination
    assert "saved_model.pb" in list(fs.walk_files(destination))
    # No local folder named after a scheme (s3:) anywhere under the home or the cwd.
    for top in (s3_run.home, os.getcwd()):
        for folder, dirs, _ in os.walk(top):
            assert not [d for d in dirs if d.endswith(":")], (folder, dirs)
    assert not os.path.exists(os.path.join(s3_run.home, "pipelines"))
    assert not os.path.exists(os.path.join(s3_run.home, "serving"))


def test_pushed_version_loads_from_s3_under_the_session_loader(s3_run):
    """TF Serving's loader (tf.compat.v1 Session + loader.load) reads the version from s3://."""
    from tests.export.conftest import SessionModel
    destination = s3_run.report().stage("Pusher").outputs["PushedModel"]["pushed_destination"]
    model = SessionModel(destination)
    out = model.run("generate", prompt=np.array([b"def ", b"x", b""], object),
                    max_new_tokens=np.array([3, 2, 0], np.int32))
    assert len(next(iter(out.values()))) == 3


def test_report_lineage_and_up_to_date_with_remote_artifacts(s3_run, capsys):
    assert "pushed version" in s3_run.stdout
    destination = s3_run.report().stage("Pusher").outputs["PushedModel"]["pushed_destination"]
    capsys.readouterr()
    assert cli.main(["lineage", "trace", destination, "--home", s3_run.home]) == 0
    traced = capsys.readouterr().out
    assert f"{s3_run.prefix}/root/TextExampleGen/" in traced and f"{s3_run.prefix}/corpus" in traced
    # The same command again: up to date, its remote outputs checked in the bucket through fs.
    assert s3_run.rerun.exit_code == 0 and "run UP TO DATE" in s3_run.rerun.stdout, s3_run.rerun.stdout
