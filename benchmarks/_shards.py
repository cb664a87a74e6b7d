"""Random byte-token train shards for the benchmarks: sequences of uniform byte ids (each starting
with BOS), so a shard hardly compresses (a worst case for decompression)."""

import numpy as np


def write_random_shard(path: str, sequences: int, seq_len: int, gzip_level: int | None = None) -> str:
    """`sequences` records of seq_len + 1 ids in one gzip TFRecord file at `path`."""
    import tensorflow as tf

    from components.text_example_gen import shards as shard_files
    from components.tokenizer.byte_level import BOS_ID
    rng = np.random.default_rng(0)
    options = tf.io.TFRecordOptions(compression_type="GZIP", compression_level=gzip_level)
    with tf.io.TFRecordWriter(path, options=options) as writer:
        for _ in range(sequences):
            window = rng.integers(0, 256, seq_len + 1)
            window[0] = BOS_ID
            writer.write(shard_files.encode_examples(window[None])[0])
    return path
