"""The input rule (issue 20 item 1, components/training/input.py): S streams, train file i in
stream i mod S, each shuffled with seed + s; step n's global batch takes the next m = B / S
records of every stream in stream order; replica r gets rows [r b, (r + 1) b); worker w reads
only the streams under its rows.

The files' records name their file and position (ids [file, record, 0, ...]), so a batch says
where every row came from. Mutations these catch are named test by test."""

import pytest
import tensorflow as tf

from components.config import ConfigError, build_config
from components.training import input as input_lib
from schemas import FEATURE
from tests.support.input_streams import BATCH, FILES, RECORDS, SEED, SEQ_LEN, rows, write_files


@pytest.fixture(scope="module")
def train_files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("streams"), [RECORDS] * FILES)


def context(workers, worker, replicas):
    return tf.distribute.InputContext(num_input_pipelines=workers, input_pipeline_id=worker,
                                      num_replicas_in_sync=replicas)


def global_batches(files, steps, streams, **kwargs):
    """The reference: the one-device run's global batches, (file, record) rows."""
    dataset = input_lib.make_dataset(files, SEQ_LEN, BATCH, streams=streams, **kwargs)
    return [rows(inputs.numpy()) for inputs, _ in dataset.take(steps)]


def every_worker(files, steps, streams, workers, replicas, **kwargs):
    """Each step's rows as the cluster trains on them: worker 0's local replicas in order, then
    worker 1's, ... (global replica order)."""
    local = replicas // workers
    plan = input_lib.plan(files, BATCH, streams)
    per_worker = []
    for worker in range(workers):
        dataset = input_lib.worker_batches(plan, SEQ_LEN, BATCH, context(workers, worker, replicas),
                                           **kwargs)
        per_worker.append([rows(x.numpy()) for x, _ in dataset.take(steps * local)])
    return [sum((per_worker[w][n * local + j] for w in range(workers) for j in range(local)), [])
            for n in range(steps)]


def interleaved(files):
    """The documented unshuffled order of one stream's files, in plain Python: round robin over
    the files (all within the cycle of 8), 16 consecutive records of each in turn."""
    position = {name: 0 for name in files}
    order = []
    while position:
        for name in list(position):
            start = position[name]
            order += [(int(name.rsplit("-", 1)[1][:-3]), j)
                      for j in range(start, min(start + 16, RECORDS))]
            position[name] = start + 16
            if position[name] >= RECORDS:
                del position[name]
    return order


@pytest.mark.parametrize("streams", [1, 2, 4, 8])
def test_global_batch_takes_m_rows_of_every_stream_in_order(train_files, streams):
    """Unshuffled, against a plain-Python reference: stream s holds files s, s + S, ...; step n's
    batch is rows [n m, (n + 1) m) of stream 0, then of stream 1, ... Catches: contiguous blocks
    of files per stream instead of strided ones, streams concatenated out of order, a step
    taking B rather than m records of a stream, a stream not repeating."""
    steps, m = 12, BATCH // streams
    orders = [interleaved(sorted(train_files)[s::streams]) for s in range(streams)]
    got = global_batches(train_files, steps, streams)
    for n in range(steps):
        expected = []
        for order in orders:
            expected += [order[i % len(order)] for i in range(n * m, (n + 1) * m)]
        assert got[n] == expected, f"step {n}"


def test_each_stream_is_shuffled_with_its_own_seed(train_files):
    """Shuffled: rows [s m, (s + 1) m) of the batches follow an independently built tf.data
    stream of stream s's files shuffled with seed + s. Catches every stream using the run's seed
    (then streams 0 and 1 would draw the same positions), a stream reading another's files."""
    streams, steps, m = 4, 10, BATCH // 4
    got = global_batches(train_files, steps, streams, shuffle_buffer=64, seed=SEED)
    for s in range(streams):
        own = sorted(train_files)[s::streams]
        reference = (tf.data.Dataset.from_tensor_slices(own)
                     .interleave(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
                                 cycle_length=len(own), block_length=16)
                     .shuffle(64, seed=SEED + s, reshuffle_each_iteration=True).repeat()
                     .map(lambda r: tf.io.parse_single_example(
                         r, {FEATURE: tf.io.FixedLenFeature([SEQ_LEN + 1], tf.int64)})[FEATURE][:2]))
        expected = [tuple(int(v) for v in x) for x in reference.take(steps * m).as_numpy_iterator()]
        assert sum((got[n][s * m:(s + 1) * m] for n in range(steps)), []) == expected
        assert {f for f, _ in expected} == {s, s + 4}


@pytest.mark.parametrize("streams,workers,replicas",
                         [(4, 1, 2), (4, 2, 2), (4, 2, 4), (4, 4, 4), (4, 4, 8), (8, 2, 2),
                          (2, 4, 4), (1, 2, 2), (1, 2, 4), (8, 8, 8)])
@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_every_cluster_shape_trains_on_the_one_device_batches(train_files, streams, workers,
                                                              replicas):
    """All workers' per-replica batches, in global replica order, are the one-device run's
    global batches, step by step, resumed or not. Includes workers sharing a stream (S < W) and
    workers reading several (S > W). Catches: a worker keeping another's rows, local replicas
    dealt out of order, a resume skip of B instead of m records per stream."""
    kwargs = dict(shuffle_buffer=64, seed=SEED)
    reference = global_batches(train_files, 9, streams, **kwargs)
    assert every_worker(train_files, 6, streams, workers, replicas, **kwargs) == reference[:6]
    resumed = every_worker(train_files, 4, streams, workers, replicas, start_step=5, **kwargs)
    assert resumed == reference[5:]


def test_a_worker_reads_only_the_streams_under_its_rows(train_files, monkeypatch):
    """8 files, 4 streams, 2 workers: worker 1 builds streams 2 and 3 only, i.e. files 2, 3, 6
    and 7 (1/W of the files). Catches a worker reading every stream and slicing its rows (its
    batches would be right, its reading not)."""
    opened = []
    real = input_lib.stream_records
    monkeypatch.setattr(input_lib, "stream_records",
                        lambda files, **kw: opened.append(files) or real(files, **kw))
    plan = input_lib.plan(train_files, BATCH, 4)
    input_lib.worker_batches(plan, SEQ_LEN, BATCH, context(2, 1, 2))
    assert sorted(int(f.rsplit("-", 1)[1][:-3]) for files in opened for f in files) == [2, 3, 6, 7]
    assert input_lib.worker_share(BATCH, 4, 2, 1) == input_lib.WorkerShare(2, 4, 0, 4)
    assert input_lib.worker_share(BATCH, 2, 4, 3) == input_lib.WorkerShare(1, 2, 2, 2)


def test_auto_streams_is_the_largest_divisor_of_the_batch_within_the_files():
    assert [input_lib.resolve_streams(0, batch, files) for batch, files in
            [(32, 4), (32, 12), (24, 5), (16, 1), (8, 100), (6, 4)]] == [4, 8, 4, 1, 8, 3]
    assert input_lib.resolve_streams(2, 32, 4) == 2


def test_empty_files_are_left_out_of_the_streams(tmp_path):
    """A small corpus leaves some shards empty: a stream of empty files would end the input.
    Files 1 and 3 of 5 are empty: the streams are dealt over files 0, 2, 4 (auto: 2 streams for
    batch 8 within 3 files), and asking for 4 streams is an error naming both settings."""
    files = write_files(tmp_path, [RECORDS, 0, RECORDS, 0, RECORDS])
    plan = input_lib.plan(files, BATCH, 0)
    assert plan.streams == 2 and [f.rsplit("-", 1)[1] for f in plan.files] == ["0.gz", "2.gz", "4.gz"]
    batch = global_batches(files, 1, 0)[0]
    assert {f for f, _ in batch[:4]} <= {0, 4} and {f for f, _ in batch[4:]} == {2}
    with pytest.raises(ConfigError, match=r"train\.input_streams \(4\) exceeds the 3 non-empty "
                                          r"train files.*data\.train_shards"):
        input_lib.plan(files, BATCH, 4)


def test_streams_must_divide_the_global_batch():
    with pytest.raises(ConfigError, match=r"train\.input_streams \(3\) must be 0 \(auto\) or "
                                          r"divide train\.global_batch_size \(32\)"):
        build_config("tiny", overrides=["train.input_streams=3", "train.global_batch_size=32"])
    with pytest.raises(ConfigError, match=r"train\.input_streams \(3\) must divide"):
        input_lib.resolve_streams(3, 32, 8)
    assert build_config("tiny").train.input_streams == 0
