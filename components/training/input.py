"""tf.data input: shards -> (inputs, targets) batches of the global batch size."""

from __future__ import annotations

import tensorflow as tf

from schemas import FEATURE


def make_dataset(file_patterns: list[str] | str, seq_len: int, global_batch_size: int, *,
                 shuffle_buffer: int = 0, seed: int = 0, repeat: bool = True,
                 cache: bool = False) -> tf.data.Dataset:
    """Interleave gzip shards, (cache), shuffle, repeat, batch then parse (vectorized), prefetch.

    Yields (inputs, targets), each int32 (global_batch_size, seq_len): targets are inputs shifted
    left by one. Order is a function of the files and the seed alone, so a restored iterator or a
    re-run sees the same batches."""
    files = sorted(f for p in ([file_patterns] if isinstance(file_patterns, str) else file_patterns)
                   for f in tf.io.gfile.glob(p))
    if not files:
        raise FileNotFoundError(f"no TFRecord files match {file_patterns!r}")
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
                       cycle_length=min(len(files), 8), block_length=16,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if cache:
        ds = ds.cache()
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    ds = ds.batch(global_batch_size, drop_remainder=True)
    spec = {FEATURE: tf.io.FixedLenFeature([seq_len + 1], tf.int64)}

    def parse(serialized):                                      # (B,) strings -> (B, T+1) ids
        ids = tf.cast(tf.io.parse_example(serialized, spec)[FEATURE], tf.int32)
        return ids[:, :-1], ids[:, 1:]

    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                  deterministic=True).prefetch(tf.data.AUTOTUNE)
