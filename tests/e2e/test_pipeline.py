"""The whole pipeline in the chain's home (tests/e2e/conftest.py chain): first run (push),
identical re-run (cached, no second push), one training hyper-parameter changed (only Trainer and
what follows re-run), an impossible threshold (push blocked, serving untouched), the int8 variant
served. Asserted through MLMD."""

import os
import subprocess
import sys

import pytest

from pipeline.lineage.params import flatten
from pipeline.lineage.store import Lineage, properties
from tests.support.mlmd import agree_after_rounding

pytestmark = pytest.mark.slow

UPSTREAM_OF_TRAINER = ("CuratedSchemaGen", "TextExampleGen", "StatisticsGen", "ExampleValidator",
                       "AnomaliesGate")


def producer_of(lin, artifact_id):
    """(execution id, node) that output the artifact."""
    execution_id = lin.producer(artifact_id)
    assert execution_id is not None, f"no producer for artifact {artifact_id}"
    return execution_id, lin.node_of[execution_id]


def test_first_run_pushes_a_blessed_model(data_run):
    assert data_run.exit_code == 0, data_run.stderr
    report = data_run.report()
    assert all(s.state == "complete" for s in report.stages), [(s.node, s.state) for s in report.stages]
    blessing = report.stage("LanguageModelEvaluator").outputs["ModelBlessing"]
    assert blessing["blessed"] == 1 and blessing["reason"].startswith("blessed:")
    pushed = report.stage("Pusher").outputs["PushedModel"]
    assert pushed["pushed"] == 1
    assert list(data_run.served_after) == [int(pushed["pushed_version"])]
    version_dir = pushed["pushed_destination"]
    assert os.path.exists(os.path.join(version_dir, "saved_model.pb"))
    assert not [n for n in os.listdir(os.path.dirname(version_dir)) if n.startswith(".incoming")]
    evaluation = report.stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    for metric in ("loss", "perplexity", "accuracy", "examples", "tokens"):
        assert metric in evaluation
    assert evaluation["perplexity"] > 1 and 0 < evaluation["accuracy"] < 1
    for text in ("key outputs", "blessed: loss", "pushed version", "eval_loss", "decision"):
        assert text in data_run.stdout


def test_a_local_run_builds_no_tfx_package_for_its_beam_stages(data_run):
    """Caught on the old code: TFX built its 52 MB sdist for remote workers in a new temp folder
    (never removed) for every Beam stage of the run, on the DirectRunner too
    (runners/beam/staging.py; the local runner not installing it fails this too)."""
    assert data_run.exit_code == 0, data_run.stderr
    assert data_run.tfx_sdist_builds == 0


def test_lineage_examples_model_evaluation_blessing_pushed(data_run):
    store, report = data_run.store(), data_run.report()
    lin = Lineage(store)
    pushed_id = report.stage("Pusher").outputs["PushedModel"]["id"]
    pusher_execution, node = producer_of(lin, pushed_id)
    assert node == "Pusher"
    pusher_inputs = lin.inputs(pusher_execution)
    (blessing_id,) = pusher_inputs["model_blessing"]
    (model_id,) = pusher_inputs["model"]
    evaluator_execution, node = producer_of(lin, blessing_id)
    assert node == "LanguageModelEvaluator"
    evaluator_inputs = lin.inputs(evaluator_execution)
    assert evaluator_inputs["model"] == [model_id]
    trainer_execution, node = producer_of(lin, model_id)
    assert node == "Trainer"
    (examples_id,) = lin.inputs(trainer_execution)["examples"]
    assert evaluator_inputs["examples"] == [examples_id]
    assert producer_of(lin, examples_id)[1] == "TextExampleGen"
    (blessing,) = store.get_artifacts_by_id([blessing_id])
    assert properties(blessing, custom_only=True)["current_model_id"] == model_id


def test_identical_rerun_is_cached_and_pushes_nothing(identical_run, data_run):
    assert identical_run.exit_code == 0, identical_run.stderr
    states = identical_run.states()
    for node in UPSTREAM_OF_TRAINER + ("Trainer",):
        assert states[node] == "cached", (node, states)
    # Evaluation may re-run against the new baseline (the same model), but nothing is pushed twice.
    assert identical_run.served_after == data_run.served_after
    pushed = identical_run.report().stage("Pusher").outputs["PushedModel"]
    assert pushed["pushed"] == 0 and pushed["reason"].startswith("already served as version")
    assert "baseline model: none ->" in identical_run.stdout


def test_changed_hyper_parameter_reruns_only_trainer_and_after(changed_lr_run):
    assert changed_lr_run.exit_code == 0, changed_lr_run.stderr
    states = changed_lr_run.states()
    for node in UPSTREAM_OF_TRAINER:
        assert states[node] == "cached", (node, states)
    assert states["Trainer"] == "complete" and states["LanguageModelEvaluator"] == "complete"
    why = changed_lr_run.report().stage("Trainer").why
    assert "train.learning_rate: 0.003 -> 0.002" in why
    assert "Trainer: custom_config.train.learning_rate" in changed_lr_run.stdout


def test_impossible_threshold_blocks_push_and_leaves_serving_untouched(impossible_threshold_run,
                                                                      changed_lr_run):
    run = impossible_threshold_run
    assert run.exit_code == 0, run.stderr
    assert run.states()["Trainer"] == "cached"
    blessing = run.report().stage("LanguageModelEvaluator").outputs["ModelBlessing"]
    assert blessing["blessed"] == 0
    assert "> eval.max_loss 0.0100" in blessing["reason"]
    assert run.served_after == changed_lr_run.served_after  # same versions, same bytes
    assert "nothing pushed (not blessed: loss" in run.stdout
    # Only a gate changed: the Evaluator decided from changed_lr_run's memoized measurements of
    # the same model (a second pass would time token_logits again: another latency)
    evaluation = run.report().stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    before = changed_lr_run.report().stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    for figure in ("float_latency_ms", "loss", "document_bits_per_byte"):
        assert evaluation[figure] == before[figure], figure


def test_generate_uses_the_newest_pushed_version(failed_run):
    """`bigtrain generate` in a fresh process loads the newest version (after the chain's last
    run: the int8 variant's push) and continues the prompt."""
    run = failed_run
    newest = max(run.serving_versions())
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "bigtrain"), "generate", "import ",
         "--home", run.home, "--max-new-tokens", "30", "--seed", "7"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("import ") and len(proc.stdout) > len("import \n")
    assert f"serving/gpt/{newest}]" in proc.stderr


def test_identical_rerun_is_up_to_date_without_starting_the_pipeline(identical_run, data_run):
    """Issue 13 item 7: nothing changed -> no new MLMD run, the last report printed, exit 0."""
    fast = identical_run.up_to_date
    assert fast.exit_code == 0, fast.stderr
    assert "up to date" in fast.stdout and f"since run {data_run.run_id}" in fast.stdout
    assert fast.run_id == data_run.run_id  # no pipeline_run context was created
    assert f"run {data_run.run_id}" in fast.stdout and "key outputs" in fast.stdout
    assert "run UP TO DATE" in fast.stdout
    assert fast.served_after == data_run.served_after
    # --force went through TFX, and says why it ran.
    assert "forced (--force)" in identical_run.stdout


def test_changed_parameter_is_not_up_to_date_and_the_report_says_why(changed_lr_run):
    assert "why it runs: config train.learning_rate: 0.003 -> 0.002" in changed_lr_run.stdout
    assert "ran because: config train.learning_rate: 0.003 -> 0.002" in changed_lr_run.stdout


def test_each_report_reads_only_its_own_run(data_run, changed_lr_run):
    """Issue 13 item 3: two runs differing in one parameter (learning rate). Each report, written
    after both ran, shows its own run's executions and its own Trainer's model; the resolver row
    shows the baseline, never the Trainer's figures (the bug: it printed `steps, eval loss ...`)."""
    store = changed_lr_run.store()
    lin = Lineage(store)
    reports = {run.run_id: run.report() for run in (data_run, changed_lr_run)}
    models = {}
    for run_id, report in reports.items():
        assert report.run_id == run_id
        own = {e.id for e in lin.executions_of(lin.run(run_id))}
        assert {s.execution_id for s in report.stages} == own
        trainer = report.stage("Trainer")
        models[run_id] = trainer.outputs["Model"]["id"]
        resolver = report.stage("latest_blessed_model_resolver")
        from pipeline.lineage.report import summarize
        assert "steps" not in summarize(resolver) and "eval loss" not in summarize(resolver)
    assert models[data_run.run_id] != models[changed_lr_run.run_id]
    def learning_rate(report):
        flat = flatten(properties(lin.execution(report.stage("Trainer").execution_id), custom_only=True))
        (value,) = [v for k, v in flat.items() if k.endswith("train.learning_rate")]
        return value
    assert learning_rate(reports[changed_lr_run.run_id]) == 0.002
    assert learning_rate(reports[data_run.run_id]) == 0.003


def test_pushed_version_runs_every_signature_under_both_loaders(data_run):
    """Issue 9: the version `bigtrain run` pushes loads in TF Serving's loader (the TF1 session
    loader) and in tf.saved_model.load, and every signature runs in both."""
    import numpy as np
    from tests.export.conftest import SessionModel
    from tests.support.serving_calls import INPUTS, run_loaded
    import tensorflow as tf
    pushed = data_run.report().stage("Pusher").outputs["PushedModel"]
    assert pushed["variant"] == "float"
    session, loaded = SessionModel(pushed["pushed_destination"]), tf.saved_model.load(pushed["pushed_destination"])
    for name, inputs in INPUTS.items():
        a, b = session.run(name, **inputs), run_loaded(loaded, name, inputs)
        for key in a:
            assert a[key].shape[0] == 3
            if a[key].dtype != object:
                np.testing.assert_allclose(a[key], b[key], atol=1e-4)


def test_saved_model_cli_runs_generate_on_the_pushed_version(data_run):
    """The command from the issue, as a new user types it (with a batch of one prompt)."""
    version_dir = data_run.report().stage("Pusher").outputs["PushedModel"]["pushed_destination"]
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "saved_model_cli"), "run", "--dir", version_dir,
         "--tag_set", "serve", "--signature_def", "generate",
         "--input_exprs", 'prompt=["def main("];max_new_tokens=[20]'],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Result for output key text" in proc.stdout and "Result for output key new_tokens" in proc.stdout


def test_every_variant_is_evaluated_and_reported(data_run):
    report = data_run.report()
    evaluation = report.stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    assert evaluation["variants"] == "float,int8,tflite" and evaluation["serve_variant"] == "float"
    for variant in ("float", "int8", "tflite"):
        for figure in ("loss", "loss_delta", "latency_ms"):
            assert isinstance(evaluation[f"{variant}_{figure}"], float), (variant, figure)
        assert evaluation[f"{variant}_size_bytes"] > 0 and evaluation[f"{variant}_fit_to_serve"] in (0, 1)
    assert evaluation["float_loss_delta"] == 0.0
    assert abs(evaluation["float_loss"] - evaluation["loss"]) < 1e-9
    # Variants on the first eval.variant_batches (default 10) of the float model's batches; their
    # loss = float loss + the paired delta, which carries its standard error. The three figures
    # come back from MLMD each rounded to 6 decimals: they agree within three roundings, not 1e-9
    # (which failed whenever the roundings disagreed).
    for variant in ("int8", "tflite"):
        assert evaluation[f"{variant}_batches"] == min(10, evaluation["float_batches"])
        assert evaluation[f"{variant}_loss_delta_se"] >= 0.0
        assert agree_after_rounding(evaluation[f"{variant}_loss"] - evaluation["float_loss"],
                                    evaluation[f"{variant}_loss_delta"], roundings=3), variant
    assert evaluation["tflite_size_bytes"] < evaluation["float_size_bytes"]
    assert "variants (same eval sequences" in data_run.stdout
    for variant in ("int8", "tflite"):
        assert any(line.split()[:1] == [variant] for line in data_run.stdout.splitlines())


def test_serve_int8_pushes_the_blessed_int8_variant(int8_serve_run, impossible_threshold_run):
    import json
    run = int8_serve_run
    assert run.exit_code == 0, run.stderr
    states = run.states()
    assert states["Trainer"] == "cached" and states["LanguageModelEvaluator"] == "complete"
    report = run.report()
    blessing = report.stage("LanguageModelEvaluator").outputs["ModelBlessing"]
    assert blessing["serve_variant"] == "int8" and blessing["serve_path"] == "Format-Serving-int8"
    assert blessing["blessed"] == 1 and "int8 variant served" in blessing["reason"]
    pushed = report.stage("Pusher").outputs["PushedModel"]
    assert pushed["pushed"] == 1 and pushed["variant"] == "int8"
    new = set(run.served_after) - set(impossible_threshold_run.served_after)
    assert new == {int(pushed["pushed_version"])}
    with open(os.path.join(pushed["pushed_destination"], "assets.extra", "bigtrain_model.json")) as fh:
        assert json.load(fh)["variant"] == "int8"
    with open(os.path.join(pushed["pushed_destination"], "assets.extra", "bigtrain_push.json")) as fh:
        assert json.load(fh)["variant"] == "int8"
    # The whole documents are scored on the variant served, not on the float model's memoized
    # figures of the run before (export.serve is outside the eval section the memo is keyed by)
    evaluation = report.stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    assert evaluation["document_variant"] == "Format-Serving-int8"


def test_whole_document_figures_read_back_from_mlmd_everywhere(data_run, changed_lr_run, capsys):
    """The Evaluator's whole-document figures (metrics.json) are the ModelEvaluation's MLMD
    properties, the report's standing lines, `lineage diff`'s rows and the UI artifact page's.
    Catches a figure written under another name than the readers use (DOCUMENT_FIGURES), a
    reader that drops one, and the standing line printed from the Trainer's window figures."""
    import json
    from components.evaluation.documents import DOCUMENT_FIGURES
    from pipeline.lineage.standing import document_standing
    from pipeline.lineage.web.app import create_app
    from runners.local.home import readable_folders
    from tests.support.pipeline_run import lineage_json
    from benchmarks.support.mlmd import connect
    evaluation = data_run.report().stage("LanguageModelEvaluator").outputs["ModelEvaluation"]
    written = json.load(open(os.path.join(evaluation["uri"], "metrics.json")))["documents"]
    assert 0 < written["document_bytes"] <= 262144 and written["document_count"] >= 1
    assert written["document_tokens"] == written["document_bytes"] + written["document_count"]
    for name in DOCUMENT_FIGURES:
        assert agree_after_rounding(evaluation[name], written[name], roundings=1), name
    for line in document_standing(evaluation):
        assert line in data_run.stdout
    assert "whole documents" in data_run.stdout
    diff = lineage_json(capsys, data_run.home, "diff", data_run.run_id, changed_lr_run.run_id)
    rows = {m["name"]: m for m in diff["metrics"]}
    assert rows["ModelEvaluation.document_bits_per_byte"]["a"] == evaluation["document_bits_per_byte"]
    assert isinstance(rows["ModelEvaluation.document_lzma9_bits_per_byte"]["b"], float)
    client = create_app(lambda: Lineage(connect(data_run.metadata_path)),
                        readable_folders(data_run.home)).test_client()
    page = client.get(f"/artifact/{evaluation['id']}").get_data(as_text=True)
    assert "document_bits_per_byte" in page and "concatenated_lzma9_bits_per_byte" in page
    # the default held-out set (bigtrain's own code): its own figures, everywhere the split's are
    held = written["sets"]["bigtrain_code"]
    assert evaluation["heldout_sets"] == "bigtrain_code" and held["document_count"] >= 1
    assert agree_after_rounding(evaluation["heldout_bigtrain_code_document_bits_per_byte"],
                                held["document_bits_per_byte"], roundings=1)
    assert "held-out bigtrain_code" in data_run.stdout
    assert isinstance(rows["ModelEvaluation.heldout_bigtrain_code_document_bits_per_byte"]["b"], float)
    assert "heldout_bigtrain_code_document_lzma9_bits_per_byte" in page
    examples = data_run.report().stage("TextExampleGen").outputs["Examples"]
    (checked,) = json.loads(examples["decontamination_eval_sets"])      # the data stage's index
    assert checked["name"] == "<heldout>/bigtrain-code-2026-11-27.jsonl.gz" and checked["texts"] == 34


def test_the_trainer_validates_while_training_and_the_report_says_so(data_run):
    """train.eval_every=60 in the chain: validations at steps 60 and 120 on the Model in MLMD
    and in the report (TensorBoard and the curves page: tests/e2e/test_ui_real_home.py)."""
    model = data_run.report().stage("Trainer").outputs["Model"]
    assert model["validation_every"] == 60 and model["validation_step"] == 120
    assert model["best_validation_step"] in (60, 120) and model["validation_loss"] > 0
    assert "validation_loss" in data_run.stdout and "kept_best_step" not in model
