"""Pipeline stages (runtime.pipeline_stages, GPipe) against the one-device reference of
test_gradients.py: a plain tape over the whole global batch, no stages, no train-step code.

Catches: a stage boundary that drops the upstream gradient (blocks below it get zero or wrong
gradients), the tied embedding's head gradient not added to stage 0's, micro-batches not all
streamed (loss/gradients of part of the batch), a variable left on the wrong device, and
checkpoints bound to one S (restoring into another S or the unsplit model fails or differs)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from components.config import ConfigError
from components.model.gpt import build_model
from components.tokenizer.byte_level import PAD_ID, VOCAB_SIZE
from components.training import input as input_lib
from components.training import loop, pipeline_stages
from components.training.strategy import make_strategy
from components.training.train_step import make_train_step
from tests.training.conftest import GPT2, SEQ_LEN, tiny_config
from tests.support.gradients import ids, reference, relative_error  # noqa: F401 (fixture)

TOLERANCE = 1e-5


def staged(stages: int, *overrides):
    config = tiny_config("model.n_layer=4", "runtime.strategy=one_device",
                         f"runtime.pipeline_stages={stages}", "train.accumulation_steps=4",
                         *overrides)
    strategy = make_strategy(config.runtime)
    keras.utils.set_random_seed(config.train.seed)
    model, state, optimizer, _ = loop.build_training(config, strategy)
    return config, strategy, model, state, optimizer


# Pairwise, not the full 2 x 2 grid (2026-11-23, fast-tier time: each case builds and traces a
# staged model): every stage count and both heads are covered, and the tied head's gradient is
# checked where stage 0 is not the head's neighbour (4 stages: an addition to the wrong stage
# cannot pass as the right one).
@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("stages, tied, arch", [(2, "false", ()), (4, "true", ()), (2, "true", GPT2)])
def test_loss_and_gradients_equal_the_one_device_reference(ids, stages, tied, arch):  # noqa: F811
    config, _, model, state, _ = staged(stages, f"model.tie_embeddings={tied}", *arch)
    fn = loop.pipeline_gradient_fn(config, model, state)
    loss, grads, _ = tf.function(fn)(tf.constant(ids[:, :-1]), tf.constant(ids[:, 1:]))
    ref_loss, ref_grads = reference(config, model.get_weights(), ids)
    assert abs(float(loss) - ref_loss) / ref_loss <= TOLERANCE
    assert relative_error([g.numpy() for g in grads], ref_grads) <= TOLERANCE


def where(device: str):
    spec = tf.DeviceSpec.from_string(device)
    return spec.device_type, spec.device_index


def test_every_variable_of_stage_s_lives_on_device_s():
    """The model's variables and their AdamW moments (Keras colocates slots with variables)."""
    config, _, model, _, optimizer = staged(4, "model.tie_embeddings=false")
    devices = [where(d) for d in model.stage_devices]
    assert len(set(devices)) == 4
    layers = {0: [model.token_embedding, model.blocks[0]]
              + ([model.position_embedding] if model.position_embedding is not None else []),
              1: [model.blocks[1]], 2: [model.blocks[2]], 3: [model.blocks[3], model.ln_f, model.head]}
    index = optimizer._get_variable_index     # Keras AdamW's own variable -> slot mapping
    slots = {id(v): [optimizer._momentums[index(v)], optimizer._velocities[index(v)]]
             for v in model.trainable_variables}
    for stage, owned in layers.items():
        for layer in owned:
            for variable in layer.trainable_variables:
                for v in [variable] + slots[id(variable)]:
                    assert where(v.value.device) == devices[stage], (v.path, stage)
    assert sum(len(s) for s in slots.values()) == 2 * len(model.trainable_variables)


@pytest.mark.slow   # trains and restores across three layouts (fast tier: docs/benchmarks.md)
def test_checkpoint_restores_into_another_s_and_the_unsplit_model(shards, tmp_path):
    config, strategy, model, state, optimizer = staged(2)
    step = make_train_step(model, optimizer, strategy, state, global_batch_size=16,
                           accumulation_steps=4, clip_norm=1.0, dynamic_loss_scale=False, pad_id=PAD_ID,
                           gradient_fn=loop.pipeline_gradient_fn(config, model, state))
    iterator = iter(input_lib.make_dataset(shards["train"], SEQ_LEN, 16, shuffle_buffer=0))
    initial = model.get_weights()
    step(iterator), step(iterator)
    path = tf.train.Checkpoint(model=model, optimizer=optimizer, state=state).save(str(tmp_path / "c"))
    assert any(not np.array_equal(a, b) for a, b in zip(initial, model.get_weights()))
    probe = tf.constant(np.arange(2 * SEQ_LEN).reshape(2, SEQ_LEN) % 250 + 1, tf.int32)
    expected = model(probe).numpy()

    _, _, four, four_state, four_optimizer = staged(4)
    tf.train.Checkpoint(model=four, optimizer=four_optimizer, state=four_state).restore(
        path).assert_existing_objects_matched()
    unsplit_config = tiny_config("model.n_layer=4", "runtime.strategy=one_device")
    unsplit, unsplit_state, unsplit_optimizer, _ = loop.build_training(
        unsplit_config, make_strategy(unsplit_config.runtime))
    assert not isinstance(unsplit, pipeline_stages.StagedGPT)
    tf.train.Checkpoint(model=unsplit, optimizer=unsplit_optimizer, state=unsplit_state).restore(
        path).assert_existing_objects_matched()
    for other in (four, unsplit):
        for a, b in zip(model.get_weights(), other.get_weights()):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(other(probe).numpy(), expected, atol=1e-6)
    assert int(four_state.step.numpy()) == 2 and int(four_optimizer.iterations.numpy()) == 2


def test_more_stages_than_devices_is_a_config_error():
    with pytest.raises(ConfigError, match=r"runtime.pipeline_stages \(64\) exceeds the 4 devices"):
        pipeline_stages.stage_devices(64)


def test_same_seed_same_initial_weights_as_unsplit():
    _, _, model, _, _ = staged(2)
    keras.utils.set_random_seed(tiny_config().train.seed)
    plain = build_model(tiny_config("model.n_layer=4").model, SEQ_LEN, vocab_size=VOCAB_SIZE)
    for a, b in zip(model.get_weights(), plain.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_cpu_split_before_tensorflow_starts_covers_the_stages():
    """run_fn, `bigtrain run` and the Tuner split the CPU by this count before any TF op; too
    few logical devices would make a pipeline run fail when the stages are placed."""
    from components.training.strategy import cpu_devices_needed
    assert cpu_devices_needed(tiny_config("model.n_layer=4", "runtime.strategy=one_device",
                                          "runtime.pipeline_stages=3").runtime) == 3
    assert cpu_devices_needed(tiny_config("runtime.strategy=mirrored", "runtime.cpu_replicas=2").runtime) == 2
    assert cpu_devices_needed(tiny_config().runtime) == 0          # one_device, no stages
