"""The byte-unigram baseline is finite for any non-empty eval split (issue 11, item 8) and is
scored on the one evaluation sample (issue 20, item 8)."""

import hashlib
import math

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2

from components.tokenizer.byte_level import PAD_ID, VOCAB_SIZE
from components.metrics.lm import EVAL_SAMPLE_SEED
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
    got = unigram_baseline([str(tmp_path / "train.gz")], [str(tmp_path / "eval.gz")], SEQ_LEN, 0,
                           vocab_size=VOCAB_SIZE, pad_id=PAD_ID)
    # Independent reference: add-one smoothed unigram over train targets, scored on eval targets.
    train_counts = np.bincount(train[:, 1:].ravel(), minlength=VOCAB_SIZE).astype(float)
    probs = (train_counts + 1) / (train_counts.sum() + VOCAB_SIZE)
    targets = eval_[:, 1:].ravel()
    targets = targets[targets != PAD_ID]
    expected = -np.log(probs[targets]).mean()
    assert math.isfinite(got)
    assert abs(got - expected) < 1e-9  # the old code read only whole batches of 256: NaN here


def reference_sample(rows_by_shard, size):
    """The evaluation sample by its definition (metrics' docstring), computed here: the `size`
    records with the smallest sha256(seed + serialized record) keys over every shard."""
    keyed = []
    for rows in rows_by_shard:
        for ids in rows:
            example = example_pb2.Example()
            example.features.feature["input_ids"].int64_list.value.extend(ids)
            record = example.SerializeToString()
            keyed.append((hashlib.sha256(EVAL_SAMPLE_SEED.encode() + record).digest()[:16], ids))
    return np.array([ids for _, ids in sorted(keyed, key=lambda kv: kv[0])[:size]])


def test_baseline_is_scored_on_the_evaluation_sample(tmp_path):
    """Fails on the old rule (the first N eval sequences in file order): shard 0 holds only
    bytes 0-9, shard 1 only bytes 100-109, so the file-order head (all from shard 0) and the
    sample (spread over both) give different cross-entropies. Reference: a numpy unigram fit on
    train, scored on exactly the sample's sequences (drawn here by the sample's definition)."""
    rng = np.random.default_rng(1)
    train = rng.integers(0, 120, size=(200, SEQ_LEN + 1))
    train[:, 1:][train[:, 1:] >= 100] = 5          # train is mostly low bytes: shard 1 costs more
    shards = [rng.integers(0, 10, size=(30, SEQ_LEN + 1)),
              rng.integers(100, 110, size=(30, SEQ_LEN + 1))]
    write(str(tmp_path / "train.gz"), train.tolist())
    for i, rows in enumerate(shards):
        write(str(tmp_path / f"eval-{i}.gz"), rows.tolist())
    size = 12
    got = unigram_baseline([str(tmp_path / "train.gz")], [str(tmp_path / "eval-*.gz")], SEQ_LEN,
                           size, vocab_size=VOCAB_SIZE, pad_id=PAD_ID)
    sample = reference_sample([s.tolist() for s in shards], size)
    assert 0 < (sample[:, 0] >= 100).sum() < size     # the sample spans both shards
    train_counts = np.bincount(train[:, 1:].ravel(), minlength=VOCAB_SIZE).astype(float)
    train_counts[PAD_ID] = 0
    probs = (train_counts + 1) / (train_counts.sum() + VOCAB_SIZE)
    expected = -np.log(probs[sample[:, 1:].ravel()]).mean()
    head = -np.log(probs[shards[0][:size, 1:].ravel()]).mean()
    assert abs(expected - head) > 0.5                 # the old rule's figure is far off
    assert got == pytest.approx(expected, abs=1e-9)
