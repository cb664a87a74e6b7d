"""Nothing non-finite is written to ML Metadata (issue: `train.learning_rate=nan` trained 19
skipped steps to loss nan, then the run died on MLMD's raw `no such column: nan` while the
execution was RUNNING, and the next run called the stage abandoned). A stage that produces a NaN
or infinite figure fails with NonFiniteError naming it, and `bigtrain lineage why` says so."""

import json
import math

import pytest
from ml_metadata.proto import metadata_store_pb2 as pb
from tfx.types import standard_artifacts

from components.common.errors import NonFiniteError
from components.common.figures import set_figure
from pipeline.lineage import queries, record, render
from pipeline.lineage.store import Lineage
from benchmarks.support import lineage_store
from tests.support.mlmd import writable_store


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_figure_is_a_named_error_naming_it(value):
    model = standard_artifacts.Model()
    with pytest.raises(NonFiniteError, match=rf"^Trainer produced final_loss = {value}, not a "
                                             r"finite number: training diverged"):
        set_figure(model, "final_loss", value, "Trainer", hint="training diverged")
    assert "final_loss" not in model.mlmd_artifact.custom_properties


def test_finite_figures_keep_their_types():
    model = standard_artifacts.Model()
    for name, value in {"steps": 20, "loss": 2.5, "kind": "bytes", "tied": True, "none": None}.items():
        set_figure(model, name, value, "Trainer")
    set_figure(model, "lr", 1.5e-6, "Tuner", exact=True)
    props = model.mlmd_artifact.custom_properties
    assert (props["steps"].int_value, props["loss"].double_value, props["kind"].string_value,
            props["tied"].string_value, props["none"].string_value, props["lr"].string_value) == \
        (20, 2.5, "bytes", "True", "None", "1.5e-06")


def test_the_trainer_executor_fails_on_a_nan_figure_instead_of_recording_it(tmp_path, monkeypatch):
    """The executor reads the training summary and records it on the Model: a NaN loss in it
    fails the stage (it used to be recorded as the text 'nan': the Trainer 'completed')."""
    from tfx.components.trainer.executor import GenericExecutor
    from components.training import run_fn
    monkeypatch.setattr(GenericExecutor, "Do", lambda self, *args: None)
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(tmp_path / "model"), str(tmp_path / "model_run")
    (tmp_path / "model_run").mkdir()
    (tmp_path / "model_run" / run_fn.SUMMARY_FILE).write_text(json.dumps(
        {"steps": 20, "skipped_steps": 19, "final_loss": float("nan"), "eval_loss": 2.5}))
    with pytest.raises(NonFiniteError, match=r"^Trainer produced final_loss = nan"):
        run_fn.TrainerExecutor().Do({}, {"model": [model], "model_run": [model_run]}, {})


def test_the_evaluator_fails_on_a_nan_loss_instead_of_recording_it():
    from components.evaluation.component import evaluation_properties
    candidate = {"loss": float("nan"), "perplexity": float("nan"), "accuracy": 0.0,
                 "bits_per_byte": float("nan"), "loss_standard_error": 0.0, "examples": 4,
                 "sample_sequences": 4, "tokens": 256}
    evaluation = standard_artifacts.ModelEvaluation()
    with pytest.raises(NonFiniteError, match=r"^Evaluator produced loss = nan, not a finite "
                                             r"number: the model's eval loss is not finite"):
        evaluation_properties(evaluation, candidate, None, {}, {}, "float")


def test_mlmd_cannot_hold_nan_and_why_reports_the_named_cause(tmp_path):
    """Why the figure must be refused before MLMD (its sqlite store writes the double into SQL
    text), and what the user then reads: the run's failed Trainer with the NonFiniteError, not
    an abandoned stage."""
    path = lineage_store.build(str(tmp_path / "home"))
    store = writable_store(path)
    artifact = pb.Artifact(type_id=store.get_artifact_types()[0].id, uri="/x")
    artifact.custom_properties["loss"].double_value = float("nan")
    with pytest.raises(Exception, match="nan"):
        store.put_artifacts([artifact])
    try:
        try:
            set_figure(standard_artifacts.Model(), "final_loss", math.nan, "Trainer",
                       hint="training diverged")
        except NonFiniteError as err:
            raise RuntimeError("Execution 12 failed") from err   # TFX's launcher re-raises
    except RuntimeError as outer:
        record.record_run(store, "run-c", str(tmp_path / "runs" / "run-c"),
                          str(tmp_path / "run.log"), "digest", outer)
    text = render.why_text(queries.why(Lineage(store), "run-c"))
    assert "  stage:  Trainer" in text
    assert "  error:  NonFiniteError: Trainer produced final_loss = nan, not a finite number: " \
           "training diverged" in text
    assert "abandoned" not in text.split("  stage:  Trainer", 1)[1].split("  stage:", 1)[0]


TOKENIZER_FIGURES = {"bytes_per_token": 3.5, "sample_bytes": 100, "sample_documents": 2,
                     "eval_sample_bytes": 50, "eval_sample_tokens": 14, "eval_sample_documents": 1,
                     "train_documents_seen": 2, "train_bytes_seen": 100, "documents_skipped": 0,
                     "training_seconds": 0.25}


@pytest.mark.parametrize("name, value", [("training_seconds", math.nan),
                                         ("bytes_per_token", math.inf)])
def test_tokenizer_gen_refuses_a_non_finite_figure(name, value):
    """TokenizerGen's float figures (a custom property and a declared one) go through the same
    check: training_seconds used to be written with set_float_custom_property directly."""
    from components.tokenizer.byte_level import ByteTokenizer
    from components.tokenizer.component import Tokenizer, record
    artifact = Tokenizer()
    record(artifact, ByteTokenizer(), dict(TOKENIZER_FIGURES), "digest")      # the control
    assert artifact.mlmd_artifact.custom_properties["training_seconds"].double_value == 0.25
    with pytest.raises(NonFiniteError, match=rf"^TokenizerGen produced {name} = {value}, not a "
                                             r"finite number"):
        record(Tokenizer(), ByteTokenizer(), dict(TOKENIZER_FIGURES, **{name: value}), "digest")


def test_figures_py_is_the_one_writer_of_float_properties():
    """Every double an MLMD property gets goes through components/common/figures.py (set_figure,
    which refuses NaN and infinities): no stage writes one with set_float_custom_property or a
    proto's double_value directly. Caught: TextExampleGen's real_token_fraction and
    TokenizerGen's training_seconds, which bypassed it."""
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    direct = re.compile(r"set_float_custom_property\(|\.double_value\s*=(?!=)")
    found = []
    for package in ("components", "pipeline", "runners"):
        for folder, _, names in os.walk(os.path.join(root, package)):
            for name in names:
                path = os.path.join(folder, name)
                if not name.endswith(".py") or path.endswith(os.path.join("common", "figures.py")):
                    continue
                with open(path, encoding="utf-8") as fh:
                    found += [f"{os.path.relpath(path, root)}:{number}: {line.strip()}"
                              for number, line in enumerate(fh, 1) if direct.search(line)]
    assert found == []
