"""MultiWorkerMirroredStrategy through TF_CONFIG: two worker processes on loopback ports end with
the same weights, equal (within 1e-5) to single-process training on the same global batch. The
workers are forks of the module's `worker_server` (tests/training/conftest.py).

The plain two-worker job (3 steps, a checkpoint at 2) runs once per module (`first_job`): the
match with one process and the resume from separate --out folders both read that job; the resume
test forgets the job's last checkpoints and runs the workers again. The stream-sharded test is a
job of its own (other input settings)."""

import os

import numpy as np
import pytest

from components.training import loop
from tests.training.conftest import tiny_config
from tests.support.multi_worker import _examples, _forget_last_checkpoint, _run_workers, _weights

pytestmark = pytest.mark.slow

OVERRIDES = ["train.train_steps=3", "train.checkpoint_every=2"]


@pytest.fixture(scope="module")
def first_job(shards, tmp_path_factory, worker_server):
    """The plain two-worker job, run once: its folder, examples, the workers' summaries, their
    weights and whether each wrote a serving model, read when the job ended (the resume test
    then changes the folder)."""
    folder = tmp_path_factory.mktemp("first_job")
    examples = _examples(shards, folder)
    outputs = _run_workers(worker_server, examples, folder, OVERRIDES)
    return dict(folder=folder, examples=examples, outputs=outputs,
                weights=[_weights(folder / f"w{i}.npz") for i in range(2)],
                named=[dict(np.load(folder / f"w{i}.npz")) for i in range(2)],
                chief_saved_model=os.path.exists(folder / "w0" / "serving_model" / "saved_model.pb"),
                other_serving_model=os.path.exists(folder / "w1" / "serving_model"))


def test_two_workers_match_single_process(first_job, shards, tmp_path):
    outputs = first_job["outputs"]
    assert [o["num_replicas"] for o in outputs] == [2, 2]
    assert [o["is_chief"] for o in outputs] == [True, False]
    assert first_job["chief_saved_model"]                # chief only
    assert not first_job["other_serving_model"]

    single = loop.train(tiny_config(*OVERRIDES), shards["train"], str(tmp_path / "single_run"),
                        str(tmp_path / "single_ckpt"))
    reference = single.model.get_weights()
    for values in first_job["weights"]:
        assert len(values) == len(reference)
        assert max(float(np.max(np.abs(a - b))) for a, b in zip(values, reference)) <= 1e-5


def test_two_workers_with_separate_out_folders_resume_together(first_job, worker_server):
    """Fails before the fix: the non-chief looked for the resume point in <out>/checkpoints (the
    chief's folder on a shared file system), but with its own --out it writes only to
    <out>/checkpoints/.worker-1: it started at step 0 while the chief resumed at step 2 (the
    collectives then hang or the weights differ). Reference: the same run, uninterrupted (the
    module's first job)."""
    outputs = _resume_from_step_2_equals_uninterrupted(
        worker_server, first_job["examples"], first_job["folder"], OVERRIDES, full=first_job["named"])
    assert [o["steps"] for o in outputs] == [3, 3]


def _resume_from_step_2_equals_uninterrupted(server, examples, tmp_path, overrides, full=None) -> list[dict]:
    """Two workers train 3 steps (checkpoint at 2), each forgets its last checkpoint in its own
    --out folder and runs again: both resume from step 2 and end with the uninterrupted run's
    weights (1e-6). full: the uninterrupted workers' weights ({name: array} each) when that job
    already ran in tmp_path (else it runs here). Returns the resumed workers' summaries."""
    if full is None:
        _run_workers(server, examples, tmp_path, overrides)
        full = [dict(np.load(tmp_path / f"w{i}.npz")) for i in range(2)]
    _forget_last_checkpoint(tmp_path / "w0" / "checkpoints")
    _forget_last_checkpoint(tmp_path / "w1" / "checkpoints" / ".worker-1")
    outputs = _run_workers(server, examples, tmp_path, overrides)
    assert [o["resumed_from_step"] for o in outputs] == [2, 2]
    for index in range(2):
        resumed = np.load(tmp_path / f"w{index}.npz")
        for name, value in full[index].items():
            np.testing.assert_allclose(resumed[name], value, rtol=0, atol=1e-6)
    return outputs


def _split_into_files(pattern, folder, count):
    """The records of the `pattern` shards dealt round robin into `count` gzip files in folder."""
    import tensorflow as tf
    os.makedirs(folder)
    writers = [tf.io.TFRecordWriter(str(folder / f"part-{i}.gz"), options="GZIP")
               for i in range(count)]
    records = tf.data.TFRecordDataset(tf.io.gfile.glob(pattern), compression_type="GZIP")
    for index, record in enumerate(records.as_numpy_iterator()):
        writers[index % count].write(record)
    for writer in writers:
        writer.close()


def test_stream_sharded_workers_read_their_share_and_resume_from_their_state(shards, tmp_path, worker_server):
    """train.input_streams=4 over 4 train files on two worker processes: each worker reads only
    streams 0-1 or 2-3 (half the files), the weights equal one process training on the same
    global batches (1e-5), and a run resumed from step 2 restores each worker's own iterator
    state (nothing read again) and ends with the uninterrupted run's weights. Catches a worker
    reading the other's streams or rows (weights differ from the single process), a resumed
    worker restoring no state or another worker's (log, weights), and a state saved ahead of
    the trained steps by prefetching (weights)."""
    examples = tmp_path / "examples"
    _split_into_files(shards["train"], examples / "Split-train", 4)
    overrides = ["train.train_steps=3", "train.checkpoint_every=2", "train.input_streams=4"]
    outputs = _resume_from_step_2_equals_uninterrupted(worker_server, examples, tmp_path, overrides)
    for index, output in enumerate(outputs):
        first = 2 * index
        assert f"({index + 1} of 2) reads streams {first}-{first + 1}" in output["log"]
        assert "input: restored the iterator saved at step 2" in output["log"]
        assert "reading forward" not in output["log"]
    single = loop.train(tiny_config(*overrides), str(examples / "Split-train" / "*.gz"),
                        str(tmp_path / "single_run"), str(tmp_path / "single_ckpt"))
    for value, reference in zip(_weights(tmp_path / "w1.npz"), single.model.get_weights()):
        np.testing.assert_allclose(value, reference, rtol=0, atol=1e-5)


