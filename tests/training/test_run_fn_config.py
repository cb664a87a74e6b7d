"""run_fn receives the config sections it needs from the Trainer's custom_config.

Catches the bug where `training_view` dropped the `eval` section: the Trainer's custom_config
carried no eval settings, so run_fn rebuilt a Config with the default eval.batch_size (64) and its
reported eval figure ignored the user's setting. Only the heavy parts (training, the unigram
baseline, the export) are stubbed; trainer_custom_config, run_fn's config rebuild and its call of
loop.evaluate are the real code."""

from __future__ import annotations

import json
import types

import pytest

from components import config as config_lib
from components.common.errors import NonFiniteError
from components.serving import variants
from components.tokenizer.byte_level import ByteTokenizer
from components.config import stages
from components.training import loop, run_fn as run_fn_lib


def _fake_fn_args(tmp_path, custom_config):
    serving = tmp_path / "model" / "Format-Serving"
    (tmp_path / "model_run").mkdir()
    return types.SimpleNamespace(
        custom_config=custom_config, hyperparameters=None, base_model=None,
        train_files=[str(tmp_path / "examples" / "Split-train" / "*")],
        eval_files=[str(tmp_path / "examples" / "Split-eval" / "*")],
        model_run_dir=str(tmp_path / "model_run"), serving_model_dir=str(serving))


def _stub_heavy_parts(monkeypatch, result) -> dict:
    """loop.train returns `result`; the baseline, the tokenizer, the compressors and the export
    are stubbed; loop.evaluate records its sample size and export_variants that it ran."""
    calls = {}
    monkeypatch.setattr(loop, "train", lambda *a, **k: result)
    monkeypatch.setattr(loop, "unigram_baseline", lambda *a, **k: 5.0)
    monkeypatch.setattr(run_fn_lib, "examples_tokenizer", lambda *a, **k: ByteTokenizer())

    def fake_evaluate(model, eval_files, seq_len, batch_size, max_batches, **kwargs):
        calls["batch_size"], calls["max_batches"] = batch_size, max_batches
        return {"loss": 1.0, "bits_per_byte": 1.0, "perplexity": 2.7, "accuracy": 0.5,
                "sample_sequences": 8, "loss_standard_error": 0.1}

    monkeypatch.setattr(loop, "evaluate", fake_evaluate)
    monkeypatch.setattr(run_fn_lib, "compressor_figures", lambda *a, **k: {
        "zlib9_bits_per_byte": 2.0, "lzma9_bits_per_byte": 1.5, "compressor_text_bytes": 1})
    monkeypatch.setattr(variants, "export_variants",
                        lambda *a, **k: calls.setdefault("exported", True) and {"float": {}})
    return calls


def _result(final_loss: float = 1.0, steps: int = 1, skipped_steps: int = 0):
    return types.SimpleNamespace(
        model=object(), steps=steps, resumed_from_step=0, skipped_steps=skipped_steps,
        tokens_seen=1, tokens_per_second=1.0, final_loss=final_loss, parameter_count=1,
        flops_per_token=1, num_replicas=1, rollbacks=1, skipped_batches=2, validation={})


def _custom(config, tmp_path) -> dict:
    # What the pipeline hands TFX must survive its JSON round trip (custom_config is a JSON
    # exec property).
    return json.loads(json.dumps(run_fn_lib.trainer_custom_config(config, str(tmp_path / "ckpt"))))


def test_eval_batch_size_reaches_the_trainers_evaluation(tmp_path, monkeypatch):
    config = config_lib.build_config("tiny", None, ["eval.batch_size=8"])
    calls = _stub_heavy_parts(monkeypatch, _result())
    run_fn_lib.run_fn(_fake_fn_args(tmp_path, _custom(config, tmp_path)))
    assert calls["batch_size"] == 8
    # The Evaluator's sample size (eval.max_batches), not train.eval_batches: one sample for both
    # (before: 20 vs 50 batches, two different eval losses in one report).
    assert calls["max_batches"] == config.eval.max_batches
    # Spike rollbacks reach the summary the Trainer executor records on the Model in MLMD.
    summary = json.loads((tmp_path / "model_run" / run_fn_lib.SUMMARY_FILE).read_text())
    assert (summary["spike_rollbacks"], summary["skipped_batches"]) == (1, 2)


@pytest.mark.parametrize("loss", [float("nan"), float("inf")])
def test_a_non_finite_final_loss_fails_the_trainer_before_evaluation_and_export(
        tmp_path, monkeypatch, loss):
    """Training that ends on a non-finite loss (every step skipped up to a limit that was not
    reached, or a last step that overflowed) is NonFiniteError naming the figure and the step
    counts: nothing is evaluated, exported or summarized (the summary is what the executor
    records in MLMD)."""
    config = config_lib.build_config("tiny", None, [])
    calls = _stub_heavy_parts(monkeypatch, _result(final_loss=loss, steps=20, skipped_steps=19))
    with pytest.raises(NonFiniteError, match=(
            rf"^Trainer produced final training loss = {loss}, not a finite number: training "
            r"diverged \(20 steps, 19 skipped as non-finite\): lower train.learning_rate")):
        run_fn_lib.run_fn(_fake_fn_args(tmp_path, _custom(config, tmp_path)))
    assert calls == {}
    assert not (tmp_path / "model_run" / run_fn_lib.SUMMARY_FILE).exists()


def test_eval_batch_size_is_in_the_trainers_cache_key_not_its_checkpoint_key(tmp_path):
    """eval.batch_size changes the figure the Trainer reports, so a change re-runs the Trainer
    (TFX's cache key is the custom_config); it does not change the trained weights, so the
    checkpoint key (stages.model_view) stays and the re-run resumes instead of training again."""
    base = config_lib.build_config("tiny", None, [])
    other = config_lib.build_config("tiny", None, ["eval.batch_size=8"])
    root = str(tmp_path)
    assert run_fn_lib.trainer_custom_config(base, root) != run_fn_lib.trainer_custom_config(other, root)
    assert stages.model_view(run_fn_lib.TRAINER_READS, base) == stages.model_view(run_fn_lib.TRAINER_READS, other)


def test_eval_max_batches_reaches_the_trainers_evaluation(tmp_path, monkeypatch):
    """The Trainer measures its model on the Evaluator's sample (eval.batch_size x
    eval.max_batches). Fails before issue 39: its eval payload held batch_size only, so run_fn
    measured on the default max_batches whatever the config said."""
    config = config_lib.build_config("tiny", None, ["eval.max_batches=3"])
    calls = _stub_heavy_parts(monkeypatch, _result())
    run_fn_lib.run_fn(_fake_fn_args(tmp_path, _custom(config, tmp_path)))
    assert calls["max_batches"] == 3


def test_the_trainer_logs_the_seconds_of_each_phase_outside_its_loop(tmp_path, monkeypatch, caplog):
    """Issue 58: every run's log says where the Trainer's time went, in one INFO line of
    bigtrain.train naming the loop and each phase after it with its seconds. The Trainer's clock
    is a fake one that only the export moves, by 0.3 s: its figure must show it (a phase left
    untimed reads 0.0 or is absent), and no other phase may take any of it."""
    import re
    config = config_lib.build_config("tiny", None, [])
    _stub_heavy_parts(monkeypatch, _result())
    now = [100.0]

    def export(*args, **kwargs):
        now[0] += 0.3
        return {"float": {}}
    monkeypatch.setattr(run_fn_lib, "time", types.SimpleNamespace(perf_counter=lambda: now[0],
                                                                   process_time=lambda: now[0]))
    monkeypatch.setattr(variants, "export_variants", export)
    with caplog.at_level("INFO", logger="bigtrain.train"):
        run_fn_lib.run_fn(_fake_fn_args(tmp_path, _custom(config, tmp_path)))
    lines = [r.getMessage() for r in caplog.records
             if r.name == "bigtrain.train" and r.getMessage().startswith("Trainer stage: ")]
    assert len(lines) == 1, lines
    seconds = dict((name.strip(), float(s)) for name, s in re.findall(r"([a-z ]+) (\d+\.\d) s", lines[0]))
    assert list(seconds) == ["training loop", "outside it", "final eval", "compressors",
                             "unigram baseline", "export", "summary"], lines[0]
    assert seconds["export"] == 0.3 and seconds["outside it"] == 0.3, lines[0]
    assert sum(v for k, v in seconds.items() if k not in ("export", "outside it")) == 0, lines[0]


def test_the_trainers_payload_is_one_section_json_per_section(tmp_path):
    """One hand-off for every stage: the Trainer's custom_config holds section_json of each of its
    typed sections under the section's name, and run_fn reads them back with stages.read_back."""
    config = config_lib.build_config("tiny", None, ["train.learning_rate=0.002"])
    custom = _custom(config, tmp_path)
    assert set(custom) == set(run_fn_lib.TRAINER_READS.sections) | {"checkpoint_root", "code_digest"}
    assert custom["model"] == config_lib.section_json(config.model)
    assert custom["train"] == config_lib.section_json(config.train)
    rebuilt, tuned = run_fn_lib.trainer_config(custom, None)
    assert tuned == {} and rebuilt.train.learning_rate == 0.002
    assert (rebuilt.model, rebuilt.train) == (config.model, config.train)
    assert stages.model_view(run_fn_lib.TRAINER_READS, rebuilt) == stages.model_view(run_fn_lib.TRAINER_READS, config)


@pytest.mark.parametrize("override", [
    "runtime.beam_args=[--direct_num_workers=2]",   # how Beam runs, not what is trained
    "eval.max_loss=9.0",                            # an Evaluator gate
    "export.serve=int8",                            # the Evaluator's choice of variant
    "eval.variant_batches=3",
    "push.keep_versions=2",                         # the Pusher's
    "data.train_shards=8",                          # the data stage's (the examples carry it)
])
def test_settings_the_trainer_does_not_read_are_not_its_cache_key(tmp_path, override):
    variants = ["export.quantize=[int8]"]
    base = config_lib.build_config("tiny", None, variants)
    other = config_lib.build_config("tiny", None, [*variants, override])
    root = str(tmp_path)
    assert run_fn_lib.trainer_custom_config(base, root) == run_fn_lib.trainer_custom_config(other, root)
