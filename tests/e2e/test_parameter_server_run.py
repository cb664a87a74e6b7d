"""`bigtrain run` with runtime.strategy=parameter_server (issue 61): the run's process is the chief
of a TF_CONFIG cluster whose 2 ps and 2 worker tasks (`bigtrain plumbing ps-task`) the test
starts, as tests/training/test_parameter_server.py does; its Trainer trains through them, exports,
and the Evaluator and the Pusher run unchanged. The run is a fork of the session's fork server
(tests/conftest.py bigtrain_server) with its own TF_CONFIG: the pytest process never connects to
the cluster.

References: the step count and the tokens seen computed by hand from the config (steps x global
batch x seq_len), the 2 worker tasks the fixture started, and the Evaluator's eval loss of the
pushed export, which must agree with the Trainer's own on the same sample (the exported weights
are the ones the cluster trained)."""

import json
import os

import pytest

from components.config import build_config
from pipeline.lineage.store import properties
from tests.e2e.conftest import SMALL_RUN, PipelineRun
from tests.support.ps_cluster import _env, cluster  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow
STEPS, SEQ_LEN = 10, 64   # SMALL_RUN's
PS_RUN = [*SMALL_RUN, "--set", "runtime.strategy=parameter_server"]
# A guard against a chief hung on its cluster, not a speed check (the session's runs' own bound).
RUN_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def worker_server(bigtrain_server):
    """The cluster fixture's process server (tests/training/conftest.py names it so)."""
    return bigtrain_server


@pytest.fixture(scope="module")
def ps_run(cluster, bigtrain_server, corpus, tmp_path_factory):  # noqa: F811
    home = str(tmp_path_factory.mktemp("ps_home"))
    log = tmp_path_factory.mktemp("ps_log") / "run.log"
    args = ["run", "--home", home, "--set", f"data.input={corpus[0]}", *PS_RUN]
    proc = bigtrain_server.bigtrain(args, _env(cluster["spec"], "chief", 0), output=str(log))
    code = proc.wait(timeout=RUN_TIMEOUT_S)
    run = PipelineRun(home, code, log.read_text(), "")
    runs = run.store().get_contexts_by_type("pipeline_run")
    run.run_id = max(runs, key=lambda c: (c.create_time_since_epoch, c.id)).name
    return run


def test_the_trainer_trains_through_the_cluster_then_evaluator_and_pusher_run(ps_run):
    assert ps_run.exit_code == 0, ps_run.stdout[-4000:]
    assert "parameter servers: 2 worker(s), 2 ps, from step 0" in ps_run.stdout
    report = ps_run.report()
    assert all(s.state == "complete" for s in report.stages), [(s.node, s.state) for s in report.stages]
    store = ps_run.store()
    trainer = report.stage("Trainer").outputs
    (model,) = store.get_artifacts_by_id([trainer["Model"]["id"]])
    (model_run,) = store.get_artifacts_by_id([trainer["ModelRun"]["id"]])
    props = properties(model, custom_only=True)
    assert (props["steps"], props["resumed_from_step"], props["num_replicas"]) == (STEPS, 0, 2)
    assert props["tokens_seen"] == STEPS * build_config("tiny").train.global_batch_size * SEQ_LEN
    assert props["tokens_per_second"] > 0 and props["parameter_count"] > 0
    assert os.path.exists(os.path.join(props["checkpoint_dir"], "checkpoint"))
    with open(os.path.join(model_run.uri, "training_summary.json")) as fh:
        assert json.load(fh)["steps"] == STEPS
    # Not recorded in this mode (docs/training.md): no first-step loss, no validation figures.
    assert not {"first_step_loss", "validation_loss", "best_validation_loss"} & set(props)
    evaluation = report.stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    for metric in ("loss", "perplexity", "accuracy"):
        assert metric in evaluation
    assert abs(props["eval_loss"] - evaluation["loss"]) <= 1e-3
    blessing = report.stage("LanguageModelEvaluator").outputs["ModelBlessing"]
    assert blessing["blessed"] == 1, blessing["reason"]
    pushed = report.stage("Pusher").outputs["PushedModel"]
    assert pushed["pushed"] == 1
    assert list(ps_run.serving_versions()) == [int(pushed["pushed_version"])]
    assert os.path.exists(os.path.join(pushed["pushed_destination"], "saved_model.pb"))
