"""Validation while training (train.eval_every) and keep-best (train.keep_best), through
loop.train on the session's shards: the figures at each step are the in-memory model's loss on
the head of the evaluation sample (checked against loop.evaluate on a copy of the weights saved
at that step), identical after a crash and resume, and keep_best returns the best step's weights.

Mutations these catch: validating at steps counted from the resume (step - resumed_from) instead
of multiples of eval_every (the resumed steps differ), a slice drawn anew each time (another
seed per step: the figures stop equalling loop.evaluate's), the best kept when the loss rises
(> for <), keep_best ignored at the end (the returned weights are the last step's), the best
loss not checkpointed (the resumed run keeps a worse step), a NaN validation passing silently."""

import numpy as np
import pytest

from components.common.errors import NonFiniteError
from components.training import loop, validation as validation_lib
from components.tokenizer.byte_level import ByteTokenizer
from tests.training.conftest import SEQ_LEN, tiny_config

pytestmark = pytest.mark.slow   # trains (fast tier: docs/benchmarks.md)

EVERY = ("train.train_steps=8", "train.checkpoint_every=3", "train.eval_every=2",
         "train.eval_batches=2", "eval.batch_size=8", "train.log_every=4")
# A learning rate that warms up into the destructive: the loss falls over the first steps, then
# climbs, so the best validation is an early one and never the last (keep_best must matter).
CLIMBING = ("train.learning_rate=1.0", "train.min_learning_rate=1.0", "train.warmup_steps=7",
            "train.keep_best=true")


def run(tmp_path, shards, name, *overrides, **kwargs):
    config = tiny_config(*overrides)
    checks = validation_lib.Validation.from_config(config, [shards["eval"]], ByteTokenizer())
    result = loop.train(config, shards["train"], str(tmp_path / name / "run"),
                        str(tmp_path / name / "ckpt"), validation=checks, **kwargs)
    return result, checks.history


def reference_loss(model) -> float:
    return loop.evaluate(model, [SHARDS["eval"]], SEQ_LEN, 8, 2, tokenizer=ByteTokenizer())["loss"]


SHARDS = {}


def test_validation_is_exact_across_a_resume(tmp_path, shards):
    SHARDS.update(shards)
    straight, seen = run(tmp_path, shards, "straight", *EVERY)
    assert [s for s, _, _ in seen] == [2, 4, 6, 8]
    assert seen[-1][1] == reference_loss(straight.model)     # the last one: the final weights
    assert straight.validation["validation_step"] == 8
    with pytest.raises(loop.InjectedFault):
        run(tmp_path, shards, "crashy", *EVERY, fault_at_step=5)
    resumed, after = run(tmp_path, shards, "crashy", *EVERY)
    assert resumed.resumed_from_step == 3
    assert after == seen[1:]                                  # steps 4, 6, 8: the same figures
    assert resumed.validation["best_validation_step"] == straight.validation["best_validation_step"]


def test_keep_best_exports_the_best_validation_and_survives_a_resume(tmp_path, shards):
    SHARDS.update(shards)
    best, seen = run(tmp_path, shards, "best", *EVERY, *CLIMBING)
    losses = {step: loss for step, loss, _ in seen}
    best_step = min(losses, key=lambda s: (losses[s], s))
    assert best_step != 8 and losses[8] > losses[best_step]   # the setting does what it says
    assert best.validation["kept_best_step"] == best_step
    assert reference_loss(best.model) == losses[best_step]    # the returned weights: that step's
    with pytest.raises(loop.InjectedFault):
        run(tmp_path, shards, "crashy", *EVERY, *CLIMBING, fault_at_step=7)
    resumed, _ = run(tmp_path, shards, "crashy", *EVERY, *CLIMBING)
    assert resumed.resumed_from_step == 6 and resumed.validation["kept_best_step"] == best_step
    assert max(float(np.abs(a - b).max()) for a, b in
               zip(resumed.model.get_weights(), best.model.get_weights())) == 0.0


def test_a_non_finite_validation_loss_is_a_named_error(tmp_path, shards):
    SHARDS.update(shards)
    checks = validation_lib.Validation.from_config(tiny_config(*EVERY), [shards["eval"]],
                                                   ByteTokenizer())

    class NaNModel:
        def __call__(self, ids, training=False):
            import tensorflow as tf
            return tf.fill(tf.concat([tf.shape(ids), [ByteTokenizer().vocab_size]], 0), np.nan)
    with pytest.raises(NonFiniteError, match="validation loss at step 4"):
        checks.run(NaNModel(), None, 4, None, str(tmp_path))
