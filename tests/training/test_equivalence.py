"""Numerics: the same global batch gives the same weights whatever the split over replicas and
micro-batches (float32, max |difference| <= 1e-5 after 3 optimizer steps), mixed precision
trains with float32 logits, and resuming after a crash ends where an uninterrupted run ends."""

import numpy as np
import pytest
import tensorflow as tf

from components.training import loop
from tests.training.conftest import tiny_config

TOLERANCE = 1e-5


def run(tmp_path, shards, name, *overrides, **kwargs):
    config = tiny_config(*overrides)
    return loop.train(config, shards["train"], str(tmp_path / name / "run"),
                      str(tmp_path / name / "ckpt"), **kwargs)


def max_difference(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a.model.get_weights(), b.model.get_weights()))


@pytest.fixture(scope="module")
def one_device_big_batch(tmp_path_factory, shards):
    return run(tmp_path_factory.mktemp("ref"), shards, "ref")


def test_reference_run_moves_the_weights(one_device_big_batch, tmp_path, shards):
    """Guard against a vacuous comparison: 3 steps do change the weights."""
    config = tiny_config()
    from components.model.gpt import build_model
    import keras
    keras.utils.set_random_seed(config.train.seed)
    untrained = build_model(config.model, config.data.seq_len)
    moved = max(float(np.max(np.abs(x - y))) for x, y in
                zip(untrained.get_weights(), one_device_big_batch.model.get_weights()))
    assert moved > 1e-4
    assert one_device_big_batch.steps == 3 and one_device_big_batch.num_replicas == 1


def test_mirrored_two_replicas_equals_one_device(one_device_big_batch, tmp_path, shards):
    mirrored = run(tmp_path, shards, "mirrored", "runtime.strategy=mirrored")
    assert mirrored.num_replicas == 2
    assert max_difference(mirrored, one_device_big_batch) <= TOLERANCE


def test_accumulation_equals_big_batch_on_one_device(one_device_big_batch, tmp_path, shards):
    accumulated = run(tmp_path, shards, "accum", "train.accumulation_steps=4")
    assert max_difference(accumulated, one_device_big_batch) <= TOLERANCE


def test_accumulation_equals_big_batch_mirrored(one_device_big_batch, tmp_path, shards):
    accumulated = run(tmp_path, shards, "accum_mirrored", "train.accumulation_steps=4",
                      "runtime.strategy=mirrored")
    assert accumulated.num_replicas == 2
    assert max_difference(accumulated, one_device_big_batch) <= TOLERANCE


def test_resume_after_crash_ends_with_identical_weights(tmp_path, shards):
    overrides = ("train.train_steps=8", "train.checkpoint_every=3", "runtime.strategy=mirrored")
    uninterrupted = run(tmp_path, shards, "straight", *overrides)
    with pytest.raises(loop.InjectedFault):
        run(tmp_path, shards, "crashy", *overrides, fault_at_step=5)
    resumed = run(tmp_path, shards, "crashy", *overrides)
    assert resumed.resumed_from_step == 3   # the last checkpoint before the crash
    assert resumed.steps == uninterrupted.steps == 8
    assert max_difference(resumed, uninterrupted) <= 1e-6
    # Restarted once more after the last step: nothing left to train, the last loss still reported.
    again = run(tmp_path, shards, "straight", *overrides)
    assert again.resumed_from_step == 8 and again.steps == 8
    assert again.final_loss == pytest.approx(uninterrupted.final_loss)
    assert max_difference(again, uninterrupted) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_loss_falls_with_float32_logits(tmp_path, shards, precision):
    losses = []
    result = run(tmp_path, shards, precision, f"runtime.precision={precision}",
                 "train.train_steps=50", "train.warmup_steps=5", "train.learning_rate=3e-3",
                 "train.log_every=25", on_step=lambda step, loss: losses.append(loss))
    assert result.skipped_steps <= 2
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    logits = result.model(tf.zeros([2, 8], tf.int32))
    assert logits.dtype == tf.float32
    compute = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}[precision]
    assert result.model.blocks[0].fc.compute_dtype == compute
    assert result.model.blocks[0].fc.kernel.dtype == "float32"
