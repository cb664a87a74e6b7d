"""ZeRO-1 (train.shard_optimizer_state) against the unsharded AdamW it replaces, on 2 CPU replicas.

Catches: a moment slice updated from the wrong part of the gradient, a wrong bias correction or
weight decay (weights drift from the Keras AdamW run beyond 1e-6 within 20 steps), slices not
gathered into every replica's copy (replica copies differ), state that is whole per replica
(element count), moments not checkpointed or restored (resume differs), and an optimizer step
counter advanced on skipped steps (Adam's bias correction then differs after the skip).
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from components.config import ConfigError
from components.training import loop, zero
from components.training.strategy import make_strategy
from tests.training.conftest import tiny_config
from tests.support.zero_steps import run_steps

SHARDED = ["runtime.strategy=mirrored", "runtime.cpu_replicas=2", "train.accumulation_steps=2", "train.clip_norm=0.5",
           "train.learning_rate=3e-3", "train.warmup_steps=2", "train.train_steps=20"]


@pytest.mark.slow   # trains two models 20 steps (fast tier: docs/benchmarks.md)
def test_sharded_weights_equal_unsharded_after_20_steps(shards):
    """Also: decay by role (embeddings not decayed here, kernels decayed) goes through."""
    overrides = SHARDED + ["train.decay_embeddings=false"]
    initial = []                                  # the seeded weights as built, before any step
    plain, _, _ = run_steps(tiny_config(*overrides), shards, 20,
                            lambda model: initial.extend(model.get_weights()))
    sharded, copies, optimizer = run_steps(
        tiny_config(*overrides, "train.shard_optimizer_state=true"), shards, 20)
    assert isinstance(optimizer, zero.ShardedAdamW)
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(plain, sharded))
    assert worst <= 1e-6, worst
    assert any(not np.array_equal(a, b) for a, b in zip(plain, initial))  # training moved them
    for replica_copies in copies:                                     # all-gather: copies agree
        assert all(np.array_equal(replica_copies[0], c) for c in replica_copies[1:])


@pytest.mark.slow   # trains two models under loss scaling (fast tier: docs/benchmarks.md)
def test_freeze_loss_scaling_and_a_skipped_step_match_unsharded(shards):
    """mixed_float16 with dynamic loss scaling, the first step overflowing (skipped: Adam's step
    counter must not advance), the embeddings frozen (not in the sharded optimizer)."""
    frozen = []

    def freeze(model):                 # the token table (gpt2: and the position table)
        model.token_embedding.trainable = False
        if model.position_embedding is not None:
            model.position_embedding.trainable = False
        frozen[:] = model.non_trainable_weights
    overrides = SHARDED + ["runtime.precision=mixed_float16"]
    plain, _, _ = run_steps(tiny_config(*overrides), shards, 6, freeze, overflow_first=True)
    sharded, _, optimizer = run_steps(tiny_config(*overrides, "train.shard_optimizer_state=true"),
                                      shards, 6, freeze, overflow_first=True)
    assert int(optimizer.iterations.numpy()) == 5
    assert len(optimizer.shapes) == len(plain) - len(frozen) and frozen  # frozen: no moments
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(plain, sharded))
    assert worst <= 1e-6, worst


def test_state_per_replica_is_one_over_r(shards):
    """Counted from the variables and their devices; d_model=30 so R=2 divides no odd dimension
    (the norm vectors of 30 split evenly, the 259-row embedding does not: padded)."""
    config = tiny_config(*SHARDED, "train.shard_optimizer_state=true", "model.d_model=30",
                         "model.n_head=3")             # rotary needs an even head width (10)
    strategy = make_strategy(config.runtime)
    model, _, optimizer, _ = loop.build_training(config, strategy)
    unsharded_total = 2 * sum(math.prod(v.shape) for v in model.trainable_variables)  # m and v
    by_device = {device: list(m) + list(v) for device, m, v in              # the moment slices
                 zip(optimizer.devices, optimizer.momentums, optimizer.velocities)}
    replicas = strategy.num_replicas_in_sync
    assert len(by_device) == replicas == 2
    for device, variables in by_device.items():
        assert all(device in v.device or tf.DeviceSpec.from_string(v.device) ==
                   tf.DeviceSpec.from_string(device) for v in variables), device
        count = sum(math.prod(v.shape) for v in variables)
        padding = 2 * len(model.trainable_variables)                   # <= 1 element per slice
        assert unsharded_total / replicas <= count <= unsharded_total / replicas + padding


def test_shard_size_pads_instead_of_failing():
    assert zero.shard_size(259 * 30, 2) == 3885 and zero.shard_size(7, 4) == 2
    assert zero.shard_size(1, 8) == 1


@pytest.mark.slow   # three training loops with checkpoints (crash-resume tests are slow-tier)
def test_kill_and_resume_is_exact(shards, tmp_path):
    """Checkpoint at step 4, fault after 6, resume to 8 == uninterrupted 8 (moments restored)."""
    config = tiny_config(*SHARDED, "train.shard_optimizer_state=true", "train.train_steps=8",
                         "train.checkpoint_every=4", "train.log_every=100")
    whole = loop.train(config, shards["train"], str(tmp_path / "a"), str(tmp_path / "a_ckpt"))
    with pytest.raises(loop.InjectedFault):
        loop.train(config, shards["train"], str(tmp_path / "b"), str(tmp_path / "b_ckpt"),
                   fault_at_step=6)
    resumed = loop.train(config, shards["train"], str(tmp_path / "b"), str(tmp_path / "b_ckpt"))
    assert resumed.resumed_from_step == 4 and resumed.steps == 8
    for a, b in zip(whole.model.get_weights(), resumed.model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_one_device_is_a_config_error():
    with pytest.raises(ConfigError, match="train.shard_optimizer_state"):
        tiny_config("train.shard_optimizer_state=true", "runtime.strategy=one_device")
