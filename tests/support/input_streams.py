"""Small TFRecord shards of known rows for the training input's tests."""

import tensorflow as tf

from schemas import FEATURE


SEQ_LEN, BATCH, FILES, RECORDS, SEED = 4, 8, 8, 20, 7


def write_files(folder, records_per_file):
    """gzip TFRecord files part-<i>.gz; record j of file i holds ids [i, j, 0, 0, 0]."""
    paths = []
    for i, records in enumerate(records_per_file):
        path = str(folder / f"part-{i}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for j in range(records):
                ids = [i, j] + [0] * (SEQ_LEN - 1)
                feature = {FEATURE: tf.train.Feature(int64_list=tf.train.Int64List(value=ids))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                             .SerializeToString())
        paths.append(path)
    return paths


def rows(batch) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in row[:2]) for row in batch]
