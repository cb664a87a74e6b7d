"""One evaluation sample over the whole eval split (issue 20, item 8)."""

import numpy as np
import pytest
import tensorflow as tf

from components.tokenizer.byte_level import ByteTokenizer
from components.metrics import lm as metrics
from schemas import FEATURE

SEQ_LEN = 8


def _write_shards(root, shards=3, per_shard=40):
    """Sequence i holds the value i everywhere, so a row says where it came from."""
    paths = []
    for s in range(shards):
        path = str(root / f"eval-{s}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for i in range(per_shard):
                value = s * per_shard + i
                example = tf.train.Example(features=tf.train.Features(feature={
                    FEATURE: tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[value % 256] * (SEQ_LEN + 1)))}))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def test_sample_is_spread_over_every_shard_and_independent_of_order(tmp_path):
    """Fails before the fix: evaluation read the first max_batches batches in file order, i.e.
    the first shard's first sequences only (here: values 0-23 of shard 0)."""
    paths = _write_shards(tmp_path)
    sample = metrics.eval_sample(paths, SEQ_LEN, 24)
    shards_seen = {int(row[0]) // 40 for row in sample}
    assert len(sample) == 24 and shards_seen == {0, 1, 2}
    np.testing.assert_array_equal(metrics.eval_sample(list(reversed(paths)), SEQ_LEN, 24), sample)
    # A smaller sample is the head of a larger one; 0 takes the whole split.
    np.testing.assert_array_equal(metrics.eval_sample(paths, SEQ_LEN, 10), sample[:10])
    assert len(metrics.eval_sample(paths, SEQ_LEN, 0)) == 120


def test_metrics_report_the_sample_size_and_standard_error(tmp_path):
    """Reference: a uniform logits function gives loss ln V on every token, SE 0."""
    paths = _write_shards(tmp_path)
    vocab = 259
    result = metrics.evaluate_logits_fn(
        lambda ids: tf.zeros(tf.concat([tf.shape(ids), [vocab]], 0)), paths, SEQ_LEN, 4, 5,
        tokenizer=ByteTokenizer())
    assert result["sample_sequences"] == result["examples"] == 20
    assert result["loss"] == pytest.approx(np.log(vocab), rel=1e-6)
    assert result["loss_standard_error"] == pytest.approx(0.0, abs=1e-6)
    se = metrics.ratio_standard_error(np.array([1.0, 3.0, 2.0, 6.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    assert se == pytest.approx(np.std([1, 3, 2, 6], ddof=1) / 2)


def test_compressor_bits_per_byte_of_the_sample_text():
    """Properties of the two compressors, not a restatement of the calls: random bytes do not
    compress (both ~8 bits/byte); a short repetitive text compresses far below 1; a random 40 KB
    block repeated 3 times repeats beyond zlib's 32 KiB window but inside lzma's dictionary, so
    zlib stays at ~8 while lzma reaches ~8/3. Catches swapped figures, bits per bit or bytes per
    byte (the 8), a denominator other than the text's length, and a figure of the wrong text."""
    def figures(text):
        got = metrics.compressor_bits_per_byte(text)
        assert got["compressor_text_bytes"] == len(text)
        return got["zlib9_bits_per_byte"], got["lzma9_bits_per_byte"]

    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()
    assert all(7.9 < f < 8.1 for f in figures(noise))
    assert all(0 < f < 0.25 for f in figures(b"def f(x):\n    return x + 1\n" * 200))
    block = rng.integers(0, 256, 40000, dtype=np.uint8).tobytes()
    zlib_bpb, lzma_bpb = figures(block * 3)
    assert 7.9 < zlib_bpb < 8.1 and 2.6 < lzma_bpb < 2.9      # 8/3 plus the container
    sample = np.array([[257, 104, 105, 258, 256], [257, 33, 256, 256, 256]])
    assert metrics.sample_text_bytes(sample) == b"hi!"


def test_the_compressor_text_is_the_targets_not_the_first_column():
    """Each row is seq_len + 1 ids: the first is context only, never a target. A row cut from the
    middle of a document starts with a byte (not BOS): that byte is not in the text the
    compressors see (written out by hand: the targets of [h i !  EOS] are "i!")."""
    mid_document = np.array([[104, 105, 33, 258], [120, 121, 122, 122]])
    assert metrics.sample_text_bytes(mid_document) == b"i!" + b"yzz"


def test_validation_and_the_final_evaluation_read_the_split_once(tmp_path):
    """Issue 58: validation while training scores the head of the evaluation sample; it reads it
    as the head of the final evaluation's sample (eval.batch_size x eval.max_batches), so the
    Trainer reads the eval split once, not once per sample size, and the figures are those of
    its own sample read alone. Fails when Validation reads its own size (2 reads)."""
    import types

    from components import config as config_lib
    from components.training.validation import Validation
    paths = _write_shards(tmp_path)
    config = config_lib.build_config("tiny", None, [
        f"data.seq_len={SEQ_LEN}", "train.eval_batches=2", "eval.batch_size=4", "eval.max_batches=5"])
    vocab = 259

    def model(ids, training=False):   # logits that differ row by row: so does each row's loss
        return tf.cast(ids, tf.float32)[..., None] * tf.range(vocab, dtype=tf.float32) / 1000.0

    state = types.SimpleNamespace(best_validation_loss=tf.Variable(float("inf")),
                                  best_validation_step=tf.Variable(0, dtype=tf.int64))
    metrics._cached_sample.cache_clear()
    checks = Validation.from_config(config, paths, ByteTokenizer())
    loss = checks.run(model, state, 2, lambda step, figures: None, str(tmp_path / "ckpt"))
    final = metrics.evaluate_logits_fn(model, paths, SEQ_LEN, 4, 5, tokenizer=ByteTokenizer())
    assert metrics._cached_sample.cache_info().misses == 1          # one read of the split
    assert final["sample_sequences"] == 20
    metrics._cached_sample.cache_clear()
    alone = metrics.evaluate_logits_fn(model, paths, SEQ_LEN, 4, 2, tokenizer=ByteTokenizer())
    assert (loss, checks.history[-1][2]) == (alone["loss"], alone["bits_per_byte"])
    assert alone["sample_sequences"] == 8
