import keras
import numpy as np
import pytest
import tensorflow as tf

from components.model.gpt import build_model
from components.tokenizer.byte_level import BOS_ID, PAD_ID, VOCAB_SIZE
from components.training import input as input_lib
from components.training import optimizer as optimizer_lib
from components.training.optimizer import (_PreReduced, learning_rate_at, make_optimizer,
                                            make_schedule)
from components.training.strategy import make_strategy
from components.training.train_step import TrainState, make_train_step
from tests.training.conftest import SEQ_LEN, tiny_config


def test_schedule_warmup_then_cosine_to_floor():
    lr = [float(learning_rate_at(s, 1.0, 0.1, 10, 110)) for s in range(110)]
    assert lr[0] == pytest.approx(0.1) and lr[9] == pytest.approx(1.0)
    assert lr[10] == pytest.approx(1.0) and lr[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lr[10:], lr[11:]))          # monotone decay
    assert lr[60] == pytest.approx(0.55, abs=0.01)                  # cosine midpoint


def test_dataset_yields_shifted_targets(shards):
    inputs, targets = next(iter(input_lib.make_dataset(shards["train"], SEQ_LEN, 8, shuffle_buffer=0)))
    assert inputs.shape == targets.shape == (8, SEQ_LEN)
    assert inputs.dtype == tf.int32
    np.testing.assert_array_equal(inputs.numpy()[:, 1:], targets.numpy()[:, :-1])
    assert inputs.numpy()[0, 0] == BOS_ID  # the first sequence starts a document


def test_non_finite_step_is_skipped_counted_and_scale_halved(shards):
    config = tiny_config("runtime.precision=mixed_float16")
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = build_model(config.model, SEQ_LEN, "mixed_float16", vocab_size=VOCAB_SIZE)
        optimizer = make_optimizer(config.train, learning_rate=1e-3)
        optimizer.build(model.trainable_variables)
        state = TrainState()
    step = make_train_step(model, optimizer, strategy, state, global_batch_size=16,
                           accumulation_steps=2, clip_norm=1.0, dynamic_loss_scale=True,
                           pad_id=PAD_ID)
    iterator = iter(input_lib.make_dataset(shards["train"], SEQ_LEN, 16))
    before = [w.copy() for w in model.get_weights()]
    state.loss_scale.assign(3e38)             # float16 gradients overflow: inf
    loss, norm, finite = step(iterator)
    assert not bool(finite)
    assert int(state.skipped_steps.numpy()) == 1 and int(state.step.numpy()) == 1
    assert float(state.loss_scale.numpy()) == pytest.approx(1.5e38)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    state.loss_scale.assign(2.0**10)          # a sane scale: the next step applies
    loss, norm, finite = step(iterator)
    assert bool(finite) and np.isfinite(float(loss)) and int(state.skipped_steps.numpy()) == 1
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


class _KerasAdamW(_PreReduced, keras.optimizers.AdamW):
    """The reference: Keras's own AdamW update (the scalars per variable and replica)."""


def _three_steps(shards, strategy, config, optimizer_class, initial, monkeypatch):
    """Weights and optimizer variables after 3 steps from `initial`, and how often the
    learning-rate callable ran while the step was traced (the first call)."""
    monkeypatch.setattr(optimizer_lib, "PreReducedAdamW", optimizer_class)
    schedule, calls = make_schedule(config.train), []
    with strategy.scope():
        model = build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE)
        model.set_weights(initial)
        state = TrainState()
        optimizer = make_optimizer(config.train, model,
                                   learning_rate=lambda: calls.append(1) or schedule(state.step))
        optimizer.build(model.trainable_variables)
    step = make_train_step(model, optimizer, strategy, state, global_batch_size=16,
                           accumulation_steps=1, clip_norm=1.0, dynamic_loss_scale=False,
                           pad_id=PAD_ID)
    iterator = iter(input_lib.make_dataset(shards["train"], SEQ_LEN, 16, shuffle_buffer=0))
    step(iterator)
    traced = len(calls)
    step(iterator)
    step(iterator)
    return ([w.numpy() for w in model.weights + optimizer.variables], traced)


@pytest.mark.slow   # 9 CPU-s (two models trained 3 steps): out of the fast tier
def test_adamw_with_the_step_scalars_once_equals_kerass_adamw_bit_for_bit(shards, monkeypatch):
    """optimizer._StepScalarsOnce computes the learning rate and alpha once per device instead of
    once per variable and replica: the same weights and moments, bit for bit, after 3 steps of a
    changing learning rate (warmup then decay) on 2 replicas (one device is the same code with one
    device key), and the schedule traced once per replica for the update and once per device for
    the weight decay (Keras's own: once for the update and once for each of the 9 decayed
    variables, per replica). Shown to fail (docs/mutations.md): the weight decay's cache dropped
    (the count, 20 against 4); alpha a step late (`iterations` for `iterations + 1`: the weights)."""
    config = tiny_config("runtime.strategy=mirrored", "runtime.cpu_replicas=2", "train.warmup_steps=2")
    strategy = make_strategy(config.runtime)
    with strategy.scope():
        initial = build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE).get_weights()
    ours, ours_traced = _three_steps(shards, strategy, config, optimizer_lib.PreReducedAdamW,
                                     initial, monkeypatch)
    theirs, theirs_traced = _three_steps(shards, strategy, config, _KerasAdamW, initial,
                                         monkeypatch)
    assert len(ours) == len(theirs) > len(initial)
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
    assert any(not np.array_equal(a, b) for a, b in zip(ours, initial))
    replicas = strategy.num_replicas_in_sync
    assert ours_traced == 2 * replicas < theirs_traced, (ours_traced, theirs_traced)
