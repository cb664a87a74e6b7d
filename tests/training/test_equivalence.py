"""Numerics: the same global batch gives the same weights whatever the split over replicas and
micro-batches (float32, max |difference| <= 1e-5 after 3 optimizer steps), and resuming after a
crash with dropout 0.1 ends where an uninterrupted run ends. The sharper checks (loss and pre-clip
gradients against an independent reference, mixed precision) are in test_gradients.py and
test_numerics.py. These run the default (llama) block with grouped-query attention; the model's
forward pass itself is checked against an independent NumPy llama in
tests/model/test_llama_reference.py (rotary, RMSNorm, SwiGLU, GQA written from their definitions)."""

import numpy as np
import pytest

from components.tokenizer.byte_level import VOCAB_SIZE
from components.training import loop
from tests.training.conftest import tiny_config
from tests.support.numerics import max_difference

TOLERANCE = 1e-5


def run(tmp_path, shards, name, *overrides, **kwargs):
    config = tiny_config(*overrides)
    return loop.train(config, shards["train"], str(tmp_path / name / "run"),
                      str(tmp_path / name / "ckpt"), **kwargs)


@pytest.fixture(scope="module")
def one_device_big_batch(tmp_path_factory, shards):
    return run(tmp_path_factory.mktemp("ref"), shards, "ref")


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_reference_run_moves_the_weights(one_device_big_batch, tmp_path, shards):
    """Guard against a vacuous comparison: 3 steps do change the weights."""
    config = tiny_config()
    from components.model.gpt import build_model
    import keras
    keras.utils.set_random_seed(config.train.seed)
    untrained = build_model(config.model, config.data.seq_len, vocab_size=VOCAB_SIZE)
    moved = max(float(np.max(np.abs(x - y))) for x, y in
                zip(untrained.get_weights(), one_device_big_batch.model.get_weights()))
    assert moved > 1e-4
    assert one_device_big_batch.steps == 3 and one_device_big_batch.num_replicas == 1


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_mirrored_two_replicas_equals_one_device(one_device_big_batch, tmp_path, shards):
    mirrored = run(tmp_path, shards, "mirrored", "runtime.strategy=mirrored", "runtime.cpu_replicas=2")
    assert mirrored.num_replicas == 2
    assert max_difference(mirrored, one_device_big_batch) <= TOLERANCE


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_accumulation_equals_big_batch_on_one_device(one_device_big_batch, tmp_path, shards):
    accumulated = run(tmp_path, shards, "accum", "train.accumulation_steps=4")
    assert max_difference(accumulated, one_device_big_batch) <= TOLERANCE


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_accumulation_equals_big_batch_mirrored(one_device_big_batch, tmp_path, shards):
    accumulated = run(tmp_path, shards, "accum_mirrored", "train.accumulation_steps=4",
                      "runtime.strategy=mirrored", "runtime.cpu_replicas=2")
    assert accumulated.num_replicas == 2
    assert max_difference(accumulated, one_device_big_batch) <= TOLERANCE


@pytest.mark.slow   # trains or runs a pipeline (fast tier: docs/benchmarks.md)
def test_resume_after_crash_ends_with_identical_weights(tmp_path, shards):
    """2 replicas x 2 micro-batches, per-replica input, the crash inside a log window (steps 5 of
    4-8 not yet fetched). The resumed pipeline reads on from step 3 x global batch: with
    start_step ignored (every resumed run re-reading batch 0) the weights differ by 2.4e-3 (measured)."""
    # Dropout 0.1: the masks are drawn from seeds derived from the checkpointed step counter, so
    # the resumed run draws the masks the uninterrupted one drew (Keras' SeedGenerator would not).
    overrides = ("train.train_steps=8", "train.checkpoint_every=3", "runtime.strategy=mirrored", "runtime.cpu_replicas=2",
                 "model.dropout=0.1", "train.accumulation_steps=2", "train.log_every=4")
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
