"""Beam transforms of the data stage: list -> read and classify -> pack -> gzip TFRecord shards.

    files ── ReadTextFiles ──▶ documents ((split, bucket), (path, bytes))   + quarantine records
          ── PackSequences ──▶ (split, sort_key, tf.train.Example bytes)
          ── ToTFRecordShards ──▶ <out>/Split-<split>/data_tfrecord-SSSSS-of-NNNNN.gz

Every file is counted exactly once: packed or quarantined (with its reason). Shard contents and
order are a function of the input alone (sorted keys, hash-assigned shards), so identical input
gives byte-identical shards whatever the runner's parallelism.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import sysconfig
from typing import Iterable

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from components.text_example_gen import packing, tokenizer

NAMESPACE = "bigtrain.data"
FEATURE = tokenizer.FEATURE
QUARANTINE_MANIFEST = "quarantine.jsonl"


# ----------------------------------------------------------------------------------------------
# Listing (plain functions, run before the Beam pipeline is built).


def expand_input(spec: str) -> str:
    return spec.replace("<stdlib>", sysconfig.get_paths()["stdlib"])


def list_input_files(spec: str, exclude: Iterable[str] = ()) -> tuple[str, list[tuple[str, str]]]:
    """Resolve a directory or glob to (root, sorted [(relative_path, absolute_path)]).

    Broken symlinks and unreadable entries are kept (they are quarantined later, not lost);
    directories are not files. Raises FileNotFoundError naming the spec when nothing matches.
    """
    pattern = expand_input(spec)
    if os.path.isdir(pattern):
        root = os.path.abspath(pattern)
        pattern = os.path.join(root, "**", "*")
    else:
        prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
        root = os.path.abspath(prefix if prefix.endswith(os.sep) else os.path.dirname(prefix))
    paths = []
    for path in glob.glob(pattern, recursive=True):
        path = os.path.abspath(path)
        if os.path.isdir(path):
            continue
        if any(fnmatch.fnmatch(path, pat) for pat in exclude):
            continue
        paths.append((os.path.relpath(path, root), path))
    if not paths:
        raise FileNotFoundError(f"data.input {spec!r} (expanded to {pattern!r}) matches no files")
    return root, sorted(paths)


def sequence_example_bytes(window: np.ndarray) -> bytes:
    from tensorflow.core.example import example_pb2  # imported in the worker, after pickling
    example = example_pb2.Example()
    example.features.feature[FEATURE].int64_list.value.extend(window.tolist())
    return example.SerializeToString()


# ----------------------------------------------------------------------------------------------
# DoFns.


class ReadTextFileFn(beam.DoFn):
    """(relative_path, absolute_path) -> ((split, bucket), (relative_path, bytes)), or a
    quarantine record on the 'quarantine' output: {path, reason, bytes, detail}."""

    QUARANTINE = "quarantine"

    def __init__(self, eval_fraction: float, split_salt: str, pack_buckets: int,
                 max_file_bytes: int):
        self._eval_fraction = eval_fraction
        self._salt = split_salt
        self._buckets = pack_buckets
        self._max_bytes = max_file_bytes
        self._files = Metrics.counter(NAMESPACE, "files_seen")
        self._packed_files = Metrics.counter(NAMESPACE, "files_packed")
        self._bytes_read = Metrics.counter(NAMESPACE, "bytes_read")
        self._bytes_packed = Metrics.counter(NAMESPACE, "bytes_packed")
        self._bytes_quarantined = Metrics.counter(NAMESPACE, "bytes_quarantined")
        self._skipped = {r: Metrics.counter(NAMESPACE, f"files_skipped_{r}")
                         for r in packing.SKIP_REASONS}

    def _quarantine(self, relative: str, reason: str, size: int, detail: str):
        self._skipped[reason].inc()
        self._bytes_quarantined.inc(size)
        return beam.pvalue.TaggedOutput(self.QUARANTINE, {
            "path": relative, "reason": reason, "bytes": size, "detail": detail})

    def process(self, element):
        relative, absolute = element
        self._files.inc()
        try:
            size = os.stat(absolute).st_size
            if size > self._max_bytes:
                # Not read: counted as quarantined with 0 bytes read; its size is in the detail.
                self._skipped[packing.TOO_LARGE].inc()
                yield beam.pvalue.TaggedOutput(self.QUARANTINE, {
                    "path": relative, "reason": packing.TOO_LARGE, "bytes": 0,
                    "detail": f"{size} bytes > data.max_file_bytes={self._max_bytes}"})
                return
            with open(absolute, "rb") as fh:
                data = fh.read()
        except OSError as err:
            yield self._quarantine(relative, packing.UNREADABLE, 0,
                                   f"{type(err).__name__}: {err.strerror or err}")
            return
        self._bytes_read.inc(len(data))
        reason = packing.classify(data)
        if reason is not None:
            detail = {packing.EMPTY: "0 bytes", packing.BINARY: "contains NUL bytes",
                      packing.NOT_UTF8: "not valid UTF-8"}[reason]
            yield self._quarantine(relative, reason, len(data), detail)
            return
        self._packed_files.inc()
        self._bytes_packed.inc(len(data))
        split = packing.split_for(relative, self._eval_fraction, self._salt)
        yield (split, packing.bucket_for(relative, self._buckets)), (relative, data)


class PackBucketFn(beam.DoFn):
    """((split, bucket), [(path, bytes)...]) -> (split, (bucket, index), Example bytes)."""

    def __init__(self, seq_len: int):
        self._seq_len = seq_len
        self._sequences = {s: Metrics.counter(NAMESPACE, f"sequences_{s}") for s in ("train", "eval")}
        self._real = Metrics.counter(NAMESPACE, "tokens_real")
        self._padding = Metrics.counter(NAMESPACE, "tokens_padding")

    def process(self, element):
        (split, bucket), documents = element
        ordered = [data for _, data in sorted(documents, key=lambda d: d[0])]
        for index, window in enumerate(packing.pack_documents(ordered, self._seq_len)):
            padding = int(np.count_nonzero(window == tokenizer.PAD_ID))
            self._sequences[split].inc()
            self._padding.inc(padding)
            self._real.inc(len(window) - padding)
            yield split, (bucket, index), sequence_example_bytes(window)


class WriteShardFn(beam.DoFn):
    """((split, shard), [(sort_key, bytes) ...]) -> path of one gzip TFRecord shard, written whole
    to a temporary name and renamed, so a reader never sees a partial shard."""

    def __init__(self, output_dir: str, shards: dict[str, int]):
        self._output_dir = output_dir
        self._shards = shards

    def process(self, element):
        import tensorflow as tf
        (split, shard), records = element
        split_dir = os.path.join(self._output_dir, f"Split-{split}")
        tf.io.gfile.makedirs(split_dir)
        path = os.path.join(split_dir, f"data_tfrecord-{shard:05d}-of-{self._shards[split]:05d}.gz")
        tmp = path + ".tmp"
        with tf.io.TFRecordWriter(tmp, options="GZIP") as writer:
            for _, record in sorted(records, key=lambda r: r[0]):
                writer.write(record)
        tf.io.gfile.rename(tmp, path, overwrite=True)
        yield path


class WriteManifestFn(beam.DoFn):
    """All quarantine records -> one JSON-lines manifest, sorted by path (always written)."""

    def __init__(self, path: str):
        self._path = path

    def process(self, records):
        import tensorflow as tf
        tf.io.gfile.makedirs(os.path.dirname(self._path))
        with tf.io.gfile.GFile(self._path, "w") as fh:
            for record in sorted(records, key=lambda r: r["path"]):
                fh.write(json.dumps(record, sort_keys=True) + "\n")
        yield self._path


# ----------------------------------------------------------------------------------------------
# Composite transforms.


class ReadTextFiles(beam.PTransform):
    """PCollection[(relative, absolute)] -> {'documents': ..., 'quarantine': ...}."""

    def __init__(self, eval_fraction: float, split_salt: str, pack_buckets: int,
                 max_file_bytes: int):
        super().__init__()
        self._fn = ReadTextFileFn(eval_fraction, split_salt, pack_buckets, max_file_bytes)

    def expand(self, files):
        results = (files
                   | "Spread" >> beam.Reshuffle()
                   | "ReadAndClassify" >> beam.ParDo(self._fn).with_outputs(
                       ReadTextFileFn.QUARANTINE, main="documents"))
        return {"documents": results.documents, "quarantine": results[ReadTextFileFn.QUARANTINE]}


class PackSequences(beam.PTransform):
    """Documents keyed by (split, bucket) -> (split, sort_key, serialized tf.train.Example)."""

    def __init__(self, seq_len: int):
        super().__init__()
        self._seq_len = seq_len

    def expand(self, documents):
        return (documents
                | "GroupByBucket" >> beam.GroupByKey()
                | "PackBucket" >> beam.ParDo(PackBucketFn(self._seq_len)))


def shard_for(sort_key: tuple[int, int], num_shards: int) -> int:
    return int(packing._unit_hash(f"shard:{sort_key[0]}:{sort_key[1]}") * num_shards)


class ToTFRecordShards(beam.PTransform):
    """(split, sort_key, bytes) -> gzip TFRecord shards under output_dir/Split-<split>/.

    Every shard of every split is written, empty ones included, so the file list is stable."""

    def __init__(self, output_dir: str, shards: dict[str, int]):
        super().__init__()
        self._output_dir = output_dir
        self._shards = dict(shards)

    def expand(self, sequences):
        shards = self._shards
        keyed = sequences | "AssignShard" >> beam.Map(
            lambda s: ((s[0], shard_for(s[1], shards[s[0]])), (s[1], s[2])))
        every_shard = (sequences.pipeline
                       | "AllShardKeys" >> beam.Create(
                           [((split, i), None) for split, n in sorted(shards.items())
                            for i in range(n)]))
        return ((keyed, every_shard)
                | "WithEmptyShards" >> beam.Flatten()
                | "GroupByShard" >> beam.GroupByKey()
                | "DropPlaceholders" >> beam.MapTuple(
                    lambda key, values: (key, [v for v in values if v is not None]))
                | "WriteShard" >> beam.ParDo(WriteShardFn(self._output_dir, shards)))


class WriteQuarantineManifest(beam.PTransform):
    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def expand(self, quarantine):
        return (quarantine
                | "CollectAll" >> beam.combiners.ToList()
                | "WriteManifest" >> beam.ParDo(WriteManifestFn(self._path)))


class TextToTFRecordShards(beam.PTransform):
    """The whole data stage on a PBegin: list of files in, shards and manifest out."""

    def __init__(self, files: list[tuple[str, str]], output_dir: str, *, seq_len: int,
                 eval_fraction: float, split_salt: str, pack_buckets: int, max_file_bytes: int,
                 train_shards: int, eval_shards: int):
        super().__init__()
        self._files = files
        self._output_dir = output_dir
        self._read = ReadTextFiles(eval_fraction, split_salt, pack_buckets, max_file_bytes)
        self._seq_len = seq_len
        self._shards = {"train": train_shards, "eval": eval_shards}

    def expand(self, pbegin):
        read = (pbegin | "ListFiles" >> beam.Create(self._files) | "ReadTextFiles" >> self._read)
        shards = (read["documents"]
                  | "PackSequences" >> PackSequences(self._seq_len)
                  | "ToTFRecordShards" >> ToTFRecordShards(self._output_dir, self._shards))
        manifest = read["quarantine"] | "Quarantine" >> WriteQuarantineManifest(
            os.path.join(self._output_dir, QUARANTINE_MANIFEST))
        return {"shards": shards, "manifest": manifest}
