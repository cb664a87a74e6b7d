"""ZeRO-1 (train.shard_optimizer_state) under MultiWorkerMirroredStrategy: two worker processes on
loopback ports, one replica each, against the unsharded run on the same global batch.

Catches: a worker slicing by its local replica index instead of its global replica id (both
workers would update slice 0 and slice 1 would never move: weights differ far beyond 1e-6), the
slices not all-gathered across workers (the workers' weights differ), a worker holding every
slice's moments (its checkpoint has 2x the elements), and moments not saved per worker or not
restored from the worker's own checkpoint (the resumed run differs)."""

import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from components.training import loop
from tests.training.conftest import tiny_config
from tests.support.multi_worker import _forget_last_checkpoint, _run_workers
from tests.support.zero_steps import run_steps

pytestmark = pytest.mark.slow

STEPS = ["train.train_steps=20", "train.checkpoint_every=10", "train.log_every=100"]
SHARDED = ["train.accumulation_steps=2", "train.clip_norm=0.5", "train.learning_rate=3e-3",
           "train.warmup_steps=2", "train.decay_embeddings=false", *STEPS]


def _weights(path):
    saved = np.load(path)
    return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def _state_elements(checkpoint_dir) -> int:
    """Elements of the optimizer's moment slices in a worker's latest checkpoint."""
    latest = tf.train.latest_checkpoint(str(checkpoint_dir))
    return sum(math.prod(shape) for name, shape in tf.train.list_variables(latest)
               if name.startswith(("optimizer/momentums/", "optimizer/velocities/")))


def test_two_workers_sharded_equal_unsharded_and_resume_exactly(shards, tmp_path, worker_server):
    examples = tmp_path / "examples"
    os.makedirs(examples)
    shutil.copytree(os.path.dirname(shards["train"]), examples / "Split-train")
    outputs = _run_workers(worker_server, examples, tmp_path, [*SHARDED, "train.shard_optimizer_state=true"])
    assert [o["num_replicas"] for o in outputs] == [2, 2] and [o["steps"] for o in outputs] == [20, 20]
    sharded = [_weights(tmp_path / f"w{i}.npz") for i in range(2)]

    # Reference: unsharded AdamW on 2 in-process replicas (same shares, same dropout seeds).
    reference = loop.train(tiny_config(*SHARDED, "runtime.strategy=mirrored", "runtime.cpu_replicas=2"), shards["train"],
                           str(tmp_path / "ref_run"), str(tmp_path / "ref_ckpt"))
    expected = reference.model.get_weights()
    untrained, _, _ = run_steps(tiny_config(*SHARDED, "runtime.strategy=mirrored", "runtime.cpu_replicas=2"), shards, 0)
    assert any(not np.array_equal(a, b) for a, b in zip(expected, untrained))
    for weights in sharded:
        assert len(weights) == len(expected)
        worst = max(float(np.max(np.abs(a - b))) for a, b in zip(weights, expected))
        assert worst <= 1e-6, worst

    # Optimizer state per worker (= per replica here): 1/R of the unsharded m and v.
    unsharded = 2 * sum(math.prod(v.shape) for v in reference.model.trainable_variables)
    padding = 2 * len(reference.model.trainable_variables)           # <= 1 element per slice
    for folder in (tmp_path / "w0" / "checkpoints", tmp_path / "w1" / "checkpoints" / ".worker-1"):
        assert unsharded / 2 <= _state_elements(folder) <= unsharded / 2 + padding, folder

    # Kill and resume: forget the step-20 checkpoints, both workers resume from step 10.
    _forget_last_checkpoint(tmp_path / "w0" / "checkpoints")
    _forget_last_checkpoint(tmp_path / "w1" / "checkpoints" / ".worker-1")
    outputs = _run_workers(worker_server, examples, tmp_path, [*SHARDED, "train.shard_optimizer_state=true"])
    assert [o["resumed_from_step"] for o in outputs] == [10, 10]
    for index in range(2):
        for a, b in zip(_weights(tmp_path / f"w{index}.npz"), sharded[index]):
            np.testing.assert_array_equal(a, b)
