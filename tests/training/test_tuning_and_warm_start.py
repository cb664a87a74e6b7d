"""Tuner trials run the Trainer's training loop; warm start loads a parent's weights (shapes
checked, names in errors) and freezing keeps chosen weights fixed. Tiny models, a few steps."""

import glob
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from components.tokenizer.byte_level import VOCAB_SIZE, ByteTokenizer
from components.model import weights
from components.model.gpt import build_model
from components.training import loop, warm_start
from components.serving.export import export_saved_model
from components.serving.variants import export_variants
from components.config import hyperparameters
from components.tuner import search, space
from components.config import ConfigError
from tests.training.conftest import GPT2, tiny_config


def test_hyperparameters_apply_over_the_typed_config():
    config = tiny_config("train.train_steps=50", "train.warmup_steps=5")
    tuned = hyperparameters.apply_hyperparameters(config, {
        "train.learning_rate": 4e-3, "model.d_model": 48, "train.warmup_steps": 80,
        "tuner/epochs": 3})                                   # KerasTuner bookkeeping: ignored
    assert tuned.train.learning_rate == 4e-3 and tuned.model.d_model == 48
    # The floor keeps its ratio to the peak (1e-4 / 1e-3), the warm-up is clipped to the budget.
    assert tuned.train.min_learning_rate == pytest.approx(4e-4)
    assert tuned.train.warmup_steps == 49
    assert config.model.d_model == 32                          # the base config is untouched
    with pytest.raises(ConfigError, match="train.learning_rat"):
        hyperparameters.apply_hyperparameters(config, {"train.learning_rat": 1.0})
    with pytest.raises(ConfigError, match="model.d_model"):  # 31 is not divisible by 2 heads
        hyperparameters.apply_hyperparameters(config, {"model.d_model": 31})


def test_search_space_declares_log_uniform_lr_and_choices():
    from components.config import build_config
    config = build_config("tiny", overrides=["tune.space.learning_rate=[1e-4, 1e-2]",
                                             "tune.space.dropout=[0.0, 0.2]",
                                             "tune.space.n_layer=[2, 4]"])
    hp = space.declare(config.tune.space)
    by_name = {p.name: p for p in hp.space}
    assert by_name["train.learning_rate"].sampling == "log"
    assert (by_name["train.learning_rate"].min_value, by_name["train.learning_rate"].max_value) == (1e-4, 1e-2)
    assert list(by_name["model.n_layer"].values) == [2, 4]
    assert set(by_name) == {"train.learning_rate", "train.warmup_steps", "model.dropout", "model.n_layer"}


@pytest.fixture(scope="module")
def searched(tmp_path_factory, shards):
    from components.config import TuneConfig, TuneSpaceConfig
    work = tmp_path_factory.mktemp("tune")
    base = tiny_config("train.train_steps=20")
    # Bayesian: 2 random initial points, then the Gaussian process proposes the third.
    tune = TuneConfig(trials=3, algorithm="bayesian", steps_per_trial=4, eval_batches=2, seed=3,
                      space=TuneSpaceConfig(learning_rate=(1e-4, 3e-2), warmup_steps=(1, 2)))
    hp = space.declare(tune.space)
    search.write_hparams_config(str(work / "tb"), hp)
    tuner = search.TrainLoopTuner(search.make_oracle(tune, hp), base_config=base, steps_per_trial=4,
                                  eval_batches=2, train_files=[shards["train"]],
                                  eval_files=[shards["eval"]], work_dir=str(work / "w"),
                                  log_dir=str(work / "tb"))
    tuner.search()
    return base, tuner, work


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_trials_run_the_training_loop_and_report_eval_loss(searched, shards, tmp_path):
    base, tuner, work = searched
    records = tuner.trial_records()
    assert len(records) == 3 and all(r["status"] == "COMPLETED" for r in records)
    assert len({r["values"]["train.learning_rate"] for r in records}) == 3
    assert all(r["steps"] == 4 for r in records)
    # Independent re-computation: the same config through loop.train + loop.evaluate gives the
    # trial's objective exactly (a trial that trained differently, e.g. Keras fit or another
    # step budget, would not match).
    best = min(records, key=lambda r: r["eval_loss"])
    config = space.with_step_budget(hyperparameters.apply_hyperparameters(base, best["values"]), 4)
    again = loop.train(config, [shards["train"]], str(tmp_path / "run"), str(tmp_path / "ckpt"))
    loss = loop.evaluate(again.model, [shards["eval"]], config.data.seq_len,
                         config.train.global_batch_size, 2, tokenizer=ByteTokenizer())["loss"]
    assert loss == pytest.approx(best["eval_loss"], rel=1e-5)
    assert tuner.get_best_hyperparameters()[0].values["train.learning_rate"] == best["values"]["train.learning_rate"]


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_every_trial_is_an_hparams_session(searched):
    _, tuner, work = searched
    sessions = {}
    for path in glob.glob(str(work / "tb" / "trial_*" / "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "hparams" or value.tag == "eval_loss":
                    sessions.setdefault(os.path.basename(os.path.dirname(path)), set()).add(value.tag)
    assert len(sessions) == 3
    assert all({"_hparams_/session_start_info", "eval_loss"} <= tags for tags in sessions.values())
    experiment = glob.glob(str(work / "tb" / "events.*"))
    assert experiment  # the hparams_config (experiment) summary


@pytest.fixture(scope="module")
def parent(tmp_path_factory, shards):
    """A parent trained 15 steps and exported as the Trainer exports it."""
    out = tmp_path_factory.mktemp("parent")
    config = tiny_config("train.train_steps=15", "train.learning_rate=1e-2", "train.min_learning_rate=1e-3")
    result = loop.train(config, [shards["train"]], str(out / "run"), str(out / "ckpt"))
    export_variants(result.model, config.model, config.data.seq_len, str(out / "model"),
                    tokenizer=ByteTokenizer(), quantize=())
    return config, result, str(out / "model")


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("parent_arch, child_arch", [("gpt2", "llama"), ("llama", "gpt2")])
def test_warm_start_across_architectures_is_a_named_error(tmp_path, parent_arch, child_arch):
    """Raised by the hook that runs before training, naming both archs; the same arch loads."""
    def built(arch):
        config = tiny_config(*(GPT2 if arch == "gpt2" else ()))
        return build_model(config.model, config.data.seq_len, vocab_size=VOCAB_SIZE)
    prefix = weights.save_weights(built(parent_arch), str(tmp_path / "weights"))
    prepare = warm_start.preparer(prefix, (), {})
    with pytest.raises(warm_start.ArchitectureMismatch,
                       match=f"parent is a model.arch={parent_arch} model but this config builds "
                             f"model.arch={child_arch}"):
        prepare(built(child_arch))
    assert warm_start.load_weights(built(parent_arch), prefix) > 0


@pytest.mark.slow   # trains a parent model (fast tier: docs/benchmarks.md)
def test_warm_start_loads_the_parents_weights(parent):
    config, result, model_dir = parent
    prefix = warm_start.checkpoint_prefix(model_dir)
    # The named weights beside the SavedModel (ExportArchive stores its variables unnamed).
    assert prefix.endswith("Format-Weights/weights")
    assert warm_start.checkpoint_prefix(os.path.join(model_dir, "Format-Serving")) == prefix
    child = build_model(config.model, config.data.seq_len, vocab_size=VOCAB_SIZE)
    assert warm_start.load_weights(child, prefix) == len(child.weights)
    for a, b in zip(child.get_weights(), result.model.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow   # trains a parent model (fast tier: docs/benchmarks.md)
def test_shape_mismatch_names_the_variable(parent):
    config, _, model_dir = parent
    wider = tiny_config("model.d_model=48", "model.n_head=2")
    with pytest.raises(warm_start.WarmStartError, match=r"variable model/\S+ has shape \[\d+, 32\] "
                                                        r"in the checkpoint but \[\d+, 48\]"):
        warm_start.load_weights(build_model(wider.model, wider.data.seq_len,
                                            vocab_size=VOCAB_SIZE),
                                warm_start.checkpoint_prefix(model_dir))
    deeper = tiny_config("model.n_layer=3")
    with pytest.raises(warm_start.WarmStartError, match="no variable model/blocks/2/"):
        warm_start.load_weights(build_model(deeper.model, deeper.data.seq_len,
                                            vocab_size=VOCAB_SIZE),
                                warm_start.checkpoint_prefix(model_dir))
    # The Trainer's path for an imported folder that is not a Model artifact: <path>/Format-Serving.
    sm = os.path.join(model_dir, "Format-Serving")
    # A Model artifact's SavedModel folder resolves to the named weights beside it.
    assert warm_start.resolve_source(sm, sm + "/Format-Serving") == os.path.join(
        model_dir, "Format-Weights", "weights")
    assert warm_start.resolve_source("none", None) is None
    with pytest.raises(warm_start.WarmStartError, match="is not a Model artifact"):
        warm_start.checkpoint_prefix(model_dir + "/nothing-here")
    with pytest.raises(warm_start.WarmStartError, match="HDF5"):
        warm_start.checkpoint_prefix("/some/model.h5")
    with pytest.raises(warm_start.WarmStartError, match="latest_blessed: no blessed model"):
        warm_start.resolve_source("latest_blessed", None)


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_fine_tune_starts_at_the_parent_and_frozen_weights_stay(parent, shards, tmp_path):
    config, result, model_dir = parent
    child_config = tiny_config("train.train_steps=2", "train.init_from=x",
                               "train.freeze=[embeddings, blocks:1]")
    report, losses = {}, []
    prepare = warm_start.preparer(warm_start.checkpoint_prefix(model_dir), child_config.train.freeze, report)
    child = loop.train(child_config, [shards["train"]], str(tmp_path / "run"), str(tmp_path / "ckpt"),
                       prepare_model=prepare, on_step=lambda s, loss: losses.append(loss))
    parent_eval = loop.evaluate(result.model, [shards["eval"]], config.data.seq_len, 16, 4,
                                tokenizer=ByteTokenizer())["loss"]
    # The first step of the fine-tune already has the parent's loss, far below a random start
    # (its near-uniform logits score ln 259 = 5.56 nats/token).
    assert abs(losses[0] - parent_eval) < 0.25, (losses[0], parent_eval)
    assert losses[0] < math.log(VOCAB_SIZE) - 0.5, losses[0]
    assert report["frozen_parameters"] > 0 and report["warm_start_variables"] == len(child.model.weights)
    frozen = {"token_embedding", "position_embedding", "block_0"}
    parent_weights = {v.path: v.numpy() for v in result.model.weights}
    for variable in child.model.weights:
        unchanged = np.array_equal(variable.numpy(), parent_weights[variable.path])
        assert unchanged == (variable.path.split("/")[1] in frozen), variable.path
    # The export of a model with frozen layers serves the same logits as the trained model.
    export_saved_model(child.model, child_config.model, child_config.data.seq_len, str(tmp_path / "sm"),
                       tokenizer=ByteTokenizer())
    ids = tf.constant([[257, 100, 101, 102]], tf.int32)
    served = tf.saved_model.load(str(tmp_path / "sm")).signatures["token_logits"](input_ids=ids)["logits"]
    np.testing.assert_allclose(served.numpy(), child.model(ids).numpy(), atol=1e-5)


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_hyperband_rounds_get_a_fraction_of_the_budget(shards, tmp_path):
    from components.config import TuneConfig, TuneSpaceConfig
    tune = TuneConfig(trials=2, algorithm="hyperband", steps_per_trial=9, eval_batches=1,
                      space=TuneSpaceConfig(learning_rate=(1e-3, 1e-2), warmup_steps=()))
    hp = space.declare(tune.space)
    tuner = search.TrainLoopTuner(search.make_oracle(tune, hp), base_config=tiny_config("train.train_steps=20"),
                                  steps_per_trial=9, eval_batches=1, train_files=[shards["train"]],
                                  eval_files=[shards["eval"]], work_dir=str(tmp_path / "w"),
                                  log_dir=str(tmp_path / "tb"))
    tuner.search(verbose=0)
    records = tuner.trial_records()
    assert len(records) == 2 and all(r["status"] == "COMPLETED" for r in records), records
    # First-round budgets: 9 steps x 1/9 "epochs" -> 1 step, raised to the 2-step floor.
    assert [r["steps"] for r in records] == [2, 2]
