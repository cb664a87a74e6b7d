"""Issue 58 deliverable 1: every step draws from the whole train split.

The data stage's train order (components/text_example_gen/order.py: one seeded permutation of the
split, cut into equal shards) read by the Trainer's reader (components/training/input.py) with the
shipped defaults (train.shuffle_buffer 2048, auto streams) over 4 shards. Record i of the split in
packing order (unit after unit, as ConvertUnitFn writes them) holds ids [i, 0, 0, 0, 0], so a batch
names the sequences it holds and their 1,024-sequence blocks of the packing order.

Compared with a uniform sampler (every row drawn uniformly, with replacement, from the split), in
expectation computed exactly: distinct of n draws from k equally likely values = k (1 - (1 - 1/k)^n).
Today's input (each unit's 1,024-window batches dealt to shards by shard_for, concatenated in unit
order) reads 10 distinct blocks in the first 64 rows where the uniform sampler reads 15.7, and
its unequal shards repeat 2,120 sequences within the first epoch: see docs/training.md, "Input order"."""

import gzip

import numpy as np
import pytest
import tensorflow as tf

from components.config import TrainConfig
from components.text_example_gen import order, shards
from components.training import input as input_lib

SEQ_LEN, BLOCK, SHARDS = 4, 1024, 4
UNITS = (3000, 5000, 2384, 6000)        # the units' train windows: 16,384 sequences, 16 blocks
TOTAL = sum(UNITS)
DEFAULTS = TrainConfig()                # the shipped reader settings
BATCH = 16                              # the 16-row batch
EPOCH = TOTAL // BATCH                  # 1,024 steps


def uniform_distinct(draws: int, values: int) -> float:
    return values * (1 - (1 - 1 / values) ** draws)


@pytest.fixture(scope="module")
def train_files(tmp_path_factory):
    """The split as the data stage writes it: order.shard_orders over the units' pieces."""
    folder = tmp_path_factory.mktemp("order")
    pieces, start = [], 0
    for unit, count in enumerate(UNITS):
        windows = np.zeros((count, SEQ_LEN + 1), np.int64)
        windows[:, 0] = np.arange(start, start + count)
        pieces.append((unit, shards.encode_examples(windows)))
        start += count
    paths = []
    for shard, records in enumerate(order.shard_orders(pieces, SHARDS)):
        paths.append(str(folder / f"data_tfrecord-{shard:05d}-of-{SHARDS:05d}.gz"))
        with gzip.open(paths[-1], "wb") as out:
            out.write(shards.frame_records(records))
    return paths


def one_device(files, **kwargs):
    return input_lib.make_dataset(files, SEQ_LEN, BATCH, streams=DEFAULTS.input_streams,
                                  shuffle_buffer=DEFAULTS.shuffle_buffer, seed=DEFAULTS.seed,
                                  **kwargs)


def ids(batches) -> list[np.ndarray]:
    return [inputs.numpy()[:, 0] for inputs, _ in batches]


def assert_like_uniform(steps: list[np.ndarray]) -> None:
    """The bounds: distinct sequences >= 97%, distinct blocks over the first 4 steps >= 90%,
    distinct blocks per batch (mean) >= 95% of the uniform sampler's expectation."""
    rows = np.concatenate(steps)
    blocks = TOTAL // BLOCK
    assert len(np.unique(rows)) >= 0.97 * uniform_distinct(len(rows), TOTAL)
    first = np.concatenate(steps[:4])
    assert len(np.unique(first // BLOCK)) >= 0.9 * uniform_distinct(len(first), blocks), (
        np.unique(first // BLOCK))
    per_batch = np.mean([len(np.unique(step // BLOCK)) for step in steps])
    assert per_batch >= 0.95 * uniform_distinct(BATCH, blocks), per_batch


def test_the_first_steps_cover_the_split_like_a_uniform_sampler(train_files):
    """64 steps of 16 rows: 1,024 rows of 16,384, uniform expectation 993.5 distinct sequences,
    15.7 distinct blocks in the first 64 rows, 10.3 per batch."""
    assert_like_uniform(ids(one_device(train_files).take(64)))


def test_the_shards_are_equal_and_hold_every_sequence_once(train_files):
    counts = [sum(1 for _ in tf.data.TFRecordDataset(f, compression_type="GZIP"))
              for f in train_files]
    assert counts == [TOTAL // SHARDS] * SHARDS


def every_replica(files, steps, workers=2, replicas=4):
    """Every row the cluster trains on in `steps` steps: 2 workers of 2 replicas each."""
    plan = input_lib.plan(files, BATCH, DEFAULTS.input_streams)
    local = replicas // workers
    rows = []
    for worker in range(workers):
        context = tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=worker,
                                             num_replicas_in_sync=replicas)
        dataset = input_lib.worker_batches(plan, SEQ_LEN, BATCH, context,
                                           shuffle_buffer=DEFAULTS.shuffle_buffer,
                                           seed=DEFAULTS.seed)
        rows += ids(dataset.take(steps * local))
    return np.concatenate(rows)


def test_each_sequence_once_per_epoch_across_2_workers_of_2_replicas(train_files):
    """One epoch (1,024 steps) of the 4 replicas' rows: every sequence exactly once; the second
    epoch again, in another order."""
    rows = every_replica(train_files, 2 * EPOCH)
    assert not np.array_equal(epoch_rows(rows, 0), epoch_rows(rows, 1))
    per_epoch = [np.sort(epoch_rows(rows, e)) for e in range(2)]
    assert all(np.array_equal(seen, np.arange(TOTAL)) for seen in per_epoch), [
        (len(np.unique(seen)), TOTAL) for seen in per_epoch]


def epoch_rows(rows: np.ndarray, epoch: int) -> np.ndarray:
    """rows: worker 0's then worker 1's, each 2 epochs of (local replica batches of 4 rows);
    the rows of epoch `epoch` of both workers."""
    per_worker = rows.reshape(2, 2, -1)      # (worker, epoch, rows)
    return per_worker[:, epoch].ravel()


def resumed(files, stop: int, after: int, state: str) -> tuple[list, list]:
    """The `after` steps that follow step `stop`, read after a stop there: from the iterator's
    saved state, and (no state) by reading forward."""
    iterator = iter(one_device(files))
    for _ in range(stop):
        next(iterator)
    saved = tf.train.Checkpoint(input=iterator).write(state)
    restored = iter(one_device(files))
    tf.train.Checkpoint(input=restored).read(saved).assert_consumed()
    return ([next(restored)[0].numpy()[:, 0] for _ in range(after)],
            ids(one_device(files, start_step=stop).take(after)))


def test_a_resumed_input_continues_the_same_order_across_the_epoch_end(train_files, tmp_path):
    """Stopped after step 4, and after step 1,020 (4 steps before the epoch ends), resumed from
    the iterator's saved state and, without one, by reading forward: the next steps are the
    uninterrupted run's, and the run stopped at step 4 covers the split in its first 64 steps
    like a uniform sampler."""
    whole = ids(one_device(train_files).take(EPOCH + 64))
    for stop, after in ((4, 60), (EPOCH - 4, 68)):
        for got in resumed(train_files, stop, after, str(tmp_path / f"state-{stop}")):
            assert all(np.array_equal(a, b) for a, b in zip(got, whole[stop:])), stop
            if stop == 4:
                assert_like_uniform(whole[:stop] + got)
