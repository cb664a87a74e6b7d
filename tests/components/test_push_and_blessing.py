import os
import errno
import subprocess
import sys

import pytest

from components.storage import fs
from components.common.errors import DiskFullError
from components.push import layout, push, staging
from components.evaluation.decision import Decision, decide_blessing, decide_serving
from components.config import EvalConfig
from tests.support.saved_models import fake_saved_model


def test_push_is_idempotent_and_versions_increase(tmp_path):
    fake_saved_model(tmp_path / "a", b"model a")
    fake_saved_model(tmp_path / "b", b"model b")
    base = str(tmp_path / "serving" / "gpt")
    first = push.push_model(str(tmp_path / "a"), base, record={"model_id": 1})
    assert first.pushed and os.path.exists(os.path.join(first.path, "saved_model.pb"))
    again = push.push_model(str(tmp_path / "a"), base)
    assert not again.pushed and again.version == first.version
    assert again.reason == f"already served as version {first.version}"
    second = push.push_model(str(tmp_path / "b"), base)
    assert second.pushed and second.version > first.version
    assert layout.served_versions(base) == [first.version, second.version]
    # no staging folder left behind; .claims holds the push claims (components/push/staging.py),
    # models.config and batching_parameters are the deployment files (components/push/deployment.py)
    assert sorted(n for n in os.listdir(base) if n != staging.CLAIMS_DIR) == sorted(
        [str(first.version), str(second.version), "batching_parameters", "models.config"])


def _files_and_sizes(folder) -> dict[str, int]:
    return {os.path.relpath(os.path.join(d, f), folder): os.path.getsize(os.path.join(d, f))
            for d, _, names in os.walk(folder) for f in names}


def test_readers_never_see_a_partial_version(tmp_path, monkeypatch):
    """After every single file operation of a push (each file copied, written, renamed, each
    folder made), every version TF Serving would load (an all-digit folder holding
    saved_model.pb) holds all of the model's files at full size and a complete push record.
    Looked at after each step rather than by a racing thread: deterministic, and a push that
    copies into the final folder (record first, then the files) is caught at its first file."""
    base = str(tmp_path / "serving" / "gpt")
    models = []
    for i in range(3):
        fake_saved_model(tmp_path / f"m{i}", f"model {i}".encode() * 5000)
        models.append(str(tmp_path / f"m{i}"))
    expected = _files_and_sizes(models[0])          # the models differ in content, not in size
    seen, partial = [], []

    def look():
        for version in layout.served_versions(base):
            folder = os.path.join(base, str(version))
            files = _files_and_sizes(folder)
            record = files.pop(layout.PUSH_RECORD, 0)
            complete = files == expected and record > 0
            if complete:
                layout.read_push_record(folder)      # parses: written whole
            (seen if complete else partial).append(version)

    for name in ("copy", "write_bytes", "rename", "makedirs"):
        real = getattr(fs, name)
        monkeypatch.setattr(fs, name, lambda *a, _real=real, **k: (_real(*a, **k), look())[0])
    results = [push.push_model(m, base) for m in models]
    assert all(r.pushed for r in results) and not partial
    assert len(set(r.version for r in results)) == 3 and set(seen) == {r.version for r in results}


def test_push_refuses_a_folder_without_a_saved_model(tmp_path):
    os.makedirs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no saved_model.pb"):
        push.push_model(str(tmp_path / "empty"), str(tmp_path / "serving"))
    assert not os.path.exists(tmp_path / "serving" / "0")


def test_disk_full_during_the_copy_names_the_serving_dir_and_leaves_nothing(tmp_path, monkeypatch):
    """ENOSPC in the middle of the copy into staging: the error names the folder it failed in
    (the serving dir, not the home), the staging folder and both claims are gone, and the next
    push of the same model succeeds."""
    fake_saved_model(tmp_path / "a", b"model a")
    base = str(tmp_path / "serving" / "gpt")
    real_copy, copied = fs.copy, []

    def copy_until_full(source, destination, overwrite=True):
        if copied:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_copy(source, destination, overwrite)
        copied.append(destination)
    monkeypatch.setattr(fs, "copy", copy_until_full)
    with pytest.raises(DiskFullError, match=rf"while pushing .* into {base} \(No space left"):
        push.push_model(str(tmp_path / "a"), base)
    assert copied and staging.staging_dir(base, 0).rsplit("-", 2)[0] in copied[0]  # it did stage
    assert os.listdir(base) == [staging.CLAIMS_DIR]
    assert os.listdir(os.path.join(base, staging.CLAIMS_DIR)) == []
    monkeypatch.setattr(fs, "copy", real_copy)
    assert push.push_model(str(tmp_path / "a"), base).pushed


def test_a_dead_pushers_staging_folder_is_removed_by_the_next_push(tmp_path):
    fake_saved_model(tmp_path / "a", b"model a")
    base = str(tmp_path / "serving" / "gpt")
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = staging.staging_dir(base, 7).rsplit("-", 1)[0] + f"-{int(child.stdout)}"
    os.makedirs(os.path.join(dead, "variables"))
    result = push.push_model(str(tmp_path / "a"), base)
    assert result.pushed and not os.path.exists(dead)
    assert sorted(n for n in os.listdir(base) if n not in (staging.CLAIMS_DIR, layout.MODELS_CONFIG,
                                                            layout.BATCHING_FILE)) == [str(result.version)]


@pytest.mark.parametrize("candidate, baseline, blessed, reason", [
    ({"loss": 2.0, "accuracy": 0.4}, None, True, "no blessed baseline yet"),
    ({"loss": 3.5, "accuracy": 0.4}, None, False, "loss 3.5000 > eval.max_loss 3.0000"),
    ({"loss": 2.0, "accuracy": 0.1}, None, False, "accuracy 0.1000 < eval.min_accuracy 0.2000"),
    ({"loss": 2.01, "accuracy": 0.4}, {"loss": 2.0}, True, "baseline loss 2.0000"),
    ({"loss": 2.05, "accuracy": 0.4}, {"loss": 2.0}, False,
     "loss 2.0500 > baseline loss 2.0000 + eval.max_loss_regression 0.0200"),
])
def test_blessing_decision_names_threshold_value_and_baseline(candidate, baseline, blessed, reason):
    decision = decide_blessing(candidate, baseline, EvalConfig(max_loss=3.0, min_accuracy=0.2,
                                                               max_loss_regression=0.02))
    assert decision.blessed is blessed
    assert reason in decision.reason
    assert decision.reason.startswith("blessed:" if blessed else "not blessed:")


STEP = 2.0**-20   # exact in binary: the step past a threshold is not lost to rounding


@pytest.mark.parametrize("candidate, baseline, eval_config, per_token, gate, step", [
    ({"loss": 3.0, "accuracy": 0.5}, None, dict(max_loss=3.0), True, "loss", STEP),
    ({"loss": 2.0, "accuracy": 0.25}, None, dict(min_accuracy=0.25), True, "accuracy", -STEP),
    ({"loss": 2.25, "accuracy": 0.5}, {"loss": 2.0}, dict(max_loss_regression=0.25), True,
     "loss", STEP),
    ({"loss": 2.0, "accuracy": 0.5, "bits_per_byte": 1.5}, None, dict(max_bits_per_byte=1.5),
     False, "bits_per_byte", STEP),
    ({"loss": 2.0, "accuracy": 0.5, "bits_per_byte": 1.5}, {"loss": 2.0, "bits_per_byte": 1.25},
     dict(max_bits_per_byte_regression=0.25), False, "bits_per_byte", STEP),
    ({"loss": 2.0, "accuracy": 0.5, "bits_per_byte": 1.5}, None, dict(max_bits_per_byte=1.5),
     True, "bits_per_byte", STEP),
    # a regression allowance of exactly 0 is a gate (no worse than the baseline), not "off"
    ({"loss": 2.0, "accuracy": 0.5, "bits_per_byte": 1.25}, {"loss": 2.0, "bits_per_byte": 1.25},
     dict(max_bits_per_byte_regression=0.0), False, "bits_per_byte", STEP),
    ({"loss": 2.0, "accuracy": 0.5, "bits_per_byte": 1.25}, {"loss": 2.0, "bits_per_byte": 1.25},
     dict(max_bits_per_byte_regression=0.0), True, "bits_per_byte", STEP),
])
def test_a_model_exactly_at_a_threshold_is_blessed(candidate, baseline, eval_config, per_token,
                                                   gate, step):
    """The thresholds are inclusive (loss <= eval.max_loss, accuracy >= eval.min_accuracy, loss
    <= baseline + eval.max_loss_regression, bits per byte likewise): a model exactly on one is
    blessed, the smallest step past it is not. Catches `>` written `>=` in any gate (the other
    cases sit well inside or outside their thresholds)."""
    config = EvalConfig(**{"max_loss": 3.0, "min_accuracy": 0.0, **eval_config})
    at = decide_blessing(candidate, baseline, config, per_token)
    assert at.blessed, at.reason
    past = decide_blessing(dict(candidate, **{gate: candidate[gate] + step}), baseline, config,
                           per_token)
    assert not past.blessed, past.reason


def test_quantized_serving_compares_float_with_the_baseline_float():
    """export.serve=int8: the baseline gate compares this float model with the baseline's float
    model (training quality); the quantization cost is bounded by the variant's own fitness.
    The bug this catches: comparing the int8 loss with the baseline's float loss rejected a
    model whose only difference from its baseline (itself) was the quantization delta."""
    config = EvalConfig(max_loss=3.0, max_loss_regression=0.02)
    metrics = {"float": {"loss": 2.00, "accuracy": 0.4}, "int8": {"loss": 2.03, "accuracy": 0.4}}
    fit = {"int8": Decision(True, "fit to serve: loss delta +0.0300 <= 0.0500")}
    same_model = decide_serving("int8", metrics, fit, {"loss": 2.00}, config)
    assert same_model.blessed, same_model.reason
    worse = decide_serving("int8", metrics, fit, {"loss": 1.90}, config)
    assert not worse.blessed and "float model loss 2.0000 > baseline loss 1.9000" in worse.reason
    unfit = decide_serving("int8", metrics, {"int8": Decision(False, "not fit: delta too big")},
                           {"loss": 2.00}, config)
    assert not unfit.blessed and "int8 variant not fit" in unfit.reason
    absolute = decide_serving("int8", metrics, fit, None, EvalConfig(max_loss=2.01))
    assert not absolute.blessed and "loss 2.0300 > eval.max_loss" in absolute.reason
