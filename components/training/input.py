"""tf.data input: train shards -> each replica's share of every global batch.

The order rule, one for every strategy, worker count and resume (B = train.global_batch_size,
R replicas on W workers, S = train.input_streams):
- files: the non-empty train files, sorted; file i belongs to stream i mod S.
- stream s: its files interleaved (cycle <= 8, blocks of 16 records), [cached,] shuffled with
  seed + s (train.shuffle_buffer records), repeated: a function of its files and the seed alone.
- step n's global batch: the next m = B / S records of every stream in stream order, so rows
  [s m, (s + 1) m) come from stream s.
- replica r (global id; workers own consecutive ids) trains on rows [r b, (r + 1) b), b = B / R.

So a run on any number of replicas and workers trains on exactly the global batches of a
one-device run (the equivalence tests stay exact), and worker w reads only the streams under its
rows [w B / W, (w + 1) B / W): S / W streams, i.e. 1/W of the files, when W divides S; the
streams its rows touch otherwise. Rows are cut before parsing: a worker parses only its share.
S = 0 (auto) picks the largest divisor of B within the number of files; S = 1 is one global
order over all files (every worker reads all of it).

Resume: `start_step` skips start_step x m records of each stream, unparsed (linear in the step);
the training loop restores the iterator's checkpointed state instead whenever it can (feed.py).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from components.config import ConfigError
from schemas import FEATURE


def sorted_files(file_patterns: list[str] | str) -> list[str]:
    """The files matching the patterns, sorted: the order the streams are dealt from."""
    patterns = [file_patterns] if isinstance(file_patterns, str) else file_patterns
    files = sorted(f for p in patterns for f in tf.io.gfile.glob(p))
    if not files:
        raise FileNotFoundError(f"no TFRecord files match {file_patterns!r}")
    return files


def nonempty(files: list[str]) -> list[str]:
    """The files holding at least one record (reads one record of each): a stream of empty
    files would end the zip of streams, so empty shards (a small corpus) are left out."""
    def has_record(name: str) -> bool:
        return bool(list(tf.data.TFRecordDataset(name, compression_type="GZIP").take(1)))
    kept = [name for name in files if has_record(name)]
    if not kept:
        raise ValueError(f"every train file is empty: {', '.join(files)}")
    return kept


def resolve_streams(requested: int, global_batch_size: int, files: int) -> int:
    """train.input_streams: 0 = the largest divisor of the global batch within `files`."""
    if requested == 0:
        return max(d for d in range(1, min(global_batch_size, files) + 1)
                   if global_batch_size % d == 0)
    if global_batch_size % requested:
        raise ConfigError(f"train.input_streams ({requested}) must divide train.global_batch_size "
                          f"({global_batch_size}); 0 picks a divisor")
    if requested > files:
        raise ConfigError(f"train.input_streams ({requested}) exceeds the {files} non-empty train "
                          f"files: lower train.input_streams (0 = auto) or raise data.train_shards")
    return requested


@dataclasses.dataclass(frozen=True)
class InputPlan:
    """The resolved rule: the non-empty sorted train files and the stream count."""
    files: tuple[str, ...]
    streams: int


def plan(file_patterns: list[str] | str, global_batch_size: int, streams: int = 1) -> InputPlan:
    """Resolve the files and train.input_streams. One stream needs no emptiness check (the
    interleave skips empty files), so it reads no record here."""
    files = sorted_files(file_patterns)
    if streams != 1:
        files = nonempty(files)
    return InputPlan(tuple(files), resolve_streams(streams, global_batch_size, len(files)))


@dataclasses.dataclass(frozen=True)
class WorkerShare:
    """What worker w reads: streams [first, stop), and of their concatenated m-row batches the
    rows [offset, offset + rows), rows = B / W."""
    first: int
    stop: int
    offset: int
    rows: int


def worker_share(global_batch_size: int, streams: int, workers: int, worker: int) -> WorkerShare:
    rows, per_stream = global_batch_size // workers, global_batch_size // streams
    start = worker * rows                                   # worker's first row of the batch
    first, stop = start // per_stream, -(-(start + rows) // per_stream)
    return WorkerShare(first, stop, start - first * per_stream, rows)


def stream_records(files: list[str], *, shuffle_buffer: int, seed: int, repeat: bool,
                   cache: bool) -> tf.data.Dataset:
    """One stream's serialized records, in an order that is a function of its files and the seed
    alone: a re-run, a resumed run and every worker of a cluster see the same sequence."""
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
                       cycle_length=min(len(files), 8), block_length=16,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if cache:
        ds = ds.cache()
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return ds.repeat() if repeat else ds


def _parse(ds: tf.data.Dataset, seq_len: int) -> tf.data.Dataset:
    """Batches of serialized records -> (inputs, targets) int32 (rows, seq_len), prefetched."""
    spec = {FEATURE: tf.io.FixedLenFeature([seq_len + 1], tf.int64)}

    def parse(serialized):                                      # (b,) strings -> (b, T+1) ids
        ids = tf.cast(tf.io.parse_example(serialized, spec)[FEATURE], tf.int32)
        return ids[:, :-1], ids[:, 1:]

    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                  deterministic=True).prefetch(tf.data.AUTOTUNE)


def worker_batches(input_plan: InputPlan, seq_len: int, global_batch_size: int,
                   context: tf.distribute.InputContext, *, start_step: int = 0,
                   shuffle_buffer: int = 0, seed: int = 0, cache: bool = False,
                   repeat: bool = True) -> tf.data.Dataset:
    """This worker's per-replica batches (`context`: its id among W workers, R replicas), b = B / R
    rows each, its L = R / W local replicas' shares of every step in replica order."""
    workers, replicas = context.num_input_pipelines, context.num_replicas_in_sync
    if global_batch_size % replicas:
        raise ValueError(f"train.global_batch_size ({global_batch_size}) is not divisible by "
                         f"{replicas} replicas")
    files, streams = list(input_plan.files), input_plan.streams
    share = worker_share(global_batch_size, streams, workers, context.input_pipeline_id)
    per_stream = global_batch_size // streams                                       # m
    parts = tuple(stream_records(files[s::streams], shuffle_buffer=shuffle_buffer, seed=seed + s,
                                 repeat=repeat, cache=cache)
                  .skip(start_step * per_stream).batch(per_stream, drop_remainder=True)
                  for s in range(share.first, share.stop))
    ds = parts[0] if len(parts) == 1 else (
        tf.data.Dataset.zip(parts).map(lambda *batches: tf.concat(batches, 0)))  # (k m,) strings
    if share.offset or share.rows != len(parts) * per_stream:
        ds = ds.map(lambda rows: rows[share.offset:share.offset + share.rows])   # (B / W,)
    local = replicas // workers
    if local > 1:                                        # (B / W,) -> L batches of (b,) in order
        ds = ds.map(lambda rows: tf.reshape(rows, [local, -1])).unbatch()
    return _parse(ds, seq_len)


def make_dataset(file_patterns: list[str] | str, seq_len: int, global_batch_size: int, *,
                 streams: int = 1, shuffle_buffer: int = 0, seed: int = 0, repeat: bool = True,
                 cache: bool = False, start_step: int = 0) -> tf.data.Dataset:
    """Whole global batches of the rule above (one replica, one worker): (inputs, targets), each
    int32 (global_batch_size, seq_len); targets are inputs shifted left by one. The reference
    the tests hold per-replica input to; also eval (one stream, repeat=False)."""
    one = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                     num_replicas_in_sync=1)
    return worker_batches(plan(file_patterns, global_batch_size, streams), seq_len,
                          global_batch_size, one, start_step=start_step,
                          shuffle_buffer=shuffle_buffer, seed=seed, cache=cache, repeat=repeat)
