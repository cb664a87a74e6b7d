"""The byte-unigram baseline is finite for any non-empty eval split (issue 11, item 8)."""

import math

import numpy as np
import tensorflow as tf
from tensorflow.core.example import example_pb2

from components.tokenizer.byte_level import PAD_ID, VOCAB_SIZE
from components.training.loop import unigram_baseline

SEQ_LEN = 16


def write(path, rows):
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for ids in rows:
            example = example_pb2.Example()
            example.features.feature["input_ids"].int64_list.value.extend(ids)
            writer.write(example.SerializeToString())


def test_tiny_eval_split_gives_the_reference_cross_entropy(tmp_path):
    rng = np.random.default_rng(0)
    train = rng.integers(0, 40, size=(300, SEQ_LEN + 1))
    eval_ = rng.integers(0, 60, size=(3, SEQ_LEN + 1))  # far fewer than one batch of 256
    eval_[-1, -4:] = PAD_ID                             # padding is never a target
    write(str(tmp_path / "train.gz"), train.tolist())
    write(str(tmp_path / "eval.gz"), eval_.tolist())
    got = unigram_baseline([str(tmp_path / "train.gz")], [str(tmp_path / "eval.gz")], SEQ_LEN)
    # Independent reference: add-one smoothed unigram over train targets, scored on eval targets.
    train_counts = np.bincount(train[:, 1:].ravel(), minlength=VOCAB_SIZE).astype(float)
    probs = (train_counts + 1) / (train_counts.sum() + VOCAB_SIZE)
    targets = eval_[:, 1:].ravel()
    targets = targets[targets != PAD_ID]
    expected = -np.log(probs[targets]).mean()
    assert math.isfinite(got)
    assert abs(got - expected) < 1e-9  # the old code read only whole batches of 256: NaN here
