"""A bad batch in the input data, rolled back (train.spike_rollback): the train shard holds one
global batch of garbage (16 sequences of NUL bytes, which the corpus never holds) as its 9th
batch, right after the checkpoint of step 8. Its loss (12.0 here) is far above 3 x the median
of the steps before it (~3.1): the loop restores the checkpoint of step 8, skips that one batch
(counted) and reads on. The run then ends with exactly the weights of a run on the same data
without the bad batch. With rollback off the same run learns the garbage: its loss on the bad
batch falls from 12.4 (clean run) to 9.3, the imprint the rollback avoids (its eval loss on clean
text, 3.350 against 3.318, moves by about what skipping any one good batch moves it, so the
garbage's own loss is what is asserted).

Why these settings: learning rate 3e-2 so the 2 x 32 model is confident by step 9 (at the
tests' 1e-3 it is still near uniform there, and a garbage batch scores 5.4 against a median of
5.2: no loss rule can tell); shuffle_buffer 1 so the shard's order is the batches' order and the
bad batch stays one batch (the good windows are shuffled once, when written, so every batch is
a mixture of the corpus rather than one file's run)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from components.text_example_gen import shards as shard_files
from components.training import loop
from schemas import FEATURE
from tests.training.conftest import SEQ_LEN, tiny_config
from tests.support.numerics import max_difference

pytestmark = pytest.mark.slow   # three trainings of 12 steps

BATCH = 16                      # TINY_OVERRIDES' train.global_batch_size
BAD_STEP = 9                    # the first step after the checkpoint of step 8
GARBAGE = np.zeros((BATCH, SEQ_LEN + 1), np.int64)   # NUL bytes: never in the corpus
CONFIG = ("train.train_steps=12", "train.checkpoint_every=4", "train.log_every=1",
          "train.spike_window=3", "train.spike_factor=3", "train.shuffle_buffer=1",
          "train.learning_rate=3e-2", "train.min_learning_rate=1e-3")
IMPRINT_NATS = 1.0              # measured 3.0: the garbage's loss, clean run minus no rollback


def _windows(pattern: str) -> np.ndarray:
    spec = {FEATURE: tf.io.FixedLenFeature([SEQ_LEN + 1], tf.int64)}
    files = tf.io.gfile.glob(pattern)
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096)
    return np.concatenate([tf.io.parse_example(r, spec)[FEATURE].numpy() for r in records])


def _write(path, windows: np.ndarray) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for example in shard_files.encode_examples(windows):
            writer.write(example)
    return str(path)


@pytest.fixture(scope="module")
def data(shards, tmp_path_factory):
    """{name: train shard}: the good windows (shuffled once), and the same with the garbage
    batch inserted as batch BAD_STEP."""
    good = _windows(shards["train"])
    good = good[np.random.RandomState(1).permutation(len(good))]
    assert len(good) > 12 * BATCH           # no wrap-around: the garbage is read once
    at = (BAD_STEP - 1) * BATCH
    root = tmp_path_factory.mktemp("bad_batch")
    return {"clean": _write(root / "clean" / "part-0.gz", good),
            "bad": _write(root / "bad" / "part-0.gz", np.concatenate([good[:at], GARBAGE,
                                                                        good[at:]]))}


def run(tmp_path, data, shard: str, *overrides):
    return loop.train(tiny_config(*CONFIG, *overrides), data[shard], str(tmp_path / "run"),
                      str(tmp_path / "ckpt"))


def garbage_loss(result) -> float:
    logits = result.model(tf.constant(GARBAGE[:, :-1], tf.int32), training=False)
    return float(tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        GARBAGE[:, 1:], logits, from_logits=True)))


@pytest.fixture(scope="module")
def clean(data, tmp_path_factory):
    return run(tmp_path_factory.mktemp("clean"), data, "clean", "train.spike_rollback=true")


def test_a_bad_batch_is_rolled_back_skipped_and_counted(clean, data, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="bigtrain.train"):
        rolled = run(tmp_path, data, "bad", "train.spike_rollback=true")
    assert clean.rollbacks == 0 and clean.skipped_batches == 0      # no false alarm
    assert (rolled.rollbacks, rolled.skipped_batches, rolled.steps) == (1, 1, 12)
    assert (f"step {BAD_STEP}: loss" in caplog.text and "spike rollback 1 to the checkpoint of "
            "step 8; the 1 batches read since are skipped (1 in all)" in caplog.text)
    # As if the bad batch had never been in the data: the clean run's weights.
    assert max_difference(rolled, clean) <= 1e-6


def test_without_rollback_the_bad_batch_leaves_its_imprint(clean, data, tmp_path):
    ruined = run(tmp_path, data, "bad", "train.spike_rollback=false")
    assert ruined.rollbacks == 0 and ruined.skipped_batches == 0
    assert max_difference(ruined, clean) > 1e-3
    assert garbage_loss(ruined) < garbage_loss(clean) - IMPRINT_NATS
