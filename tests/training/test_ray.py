"""runtime.cluster=ray: the Trainer's training (components/training/run_fn.py train_model, as
run_fn calls it) as a Ray Train job of 2 workers on the cluster `make ray` starts (a head and a
worker node on loopback, tests/support/ray.sh). Reference: the same 3 steps in one process on the
same global batch (test_multi_worker.py shows a local 2-worker job equal to it within 1e-5). The
second test kills the chief worker's process while it holds still after its step-2 checkpoint
(BIGTRAIN_TEST_PAUSE_AFTER_CHECKPOINT_S, forwarded to the workers): Ray restarts the group, which
resumes from step 2 and ends with the uninterrupted weights; the restart is in the log."""

import json
import logging
import os
import signal
import threading
import time
import types

import numpy as np
import pytest

from components.training import loop, ray_job
from tests.support.services import ROOT, service_env
from tests.training.conftest import tiny_config

pytestmark = pytest.mark.slow

OVERRIDES = ["train.train_steps=3", "train.checkpoint_every=2", "runtime.strategy=multi_worker_mirrored",
             "runtime.cluster=ray", "runtime.ray.workers=2"]
RAY_DIR = os.environ.get("BIGTRAIN_RAY_DIR", os.path.join(ROOT, "build", "ray"))


@pytest.fixture(scope="module")
def ray_config():
    address = service_env(RAY_DIR, "Ray cluster", "ray")["BIGTRAIN_RAY_ADDRESS"]
    return tiny_config(*OVERRIDES, f"runtime.ray.address={address}")


@pytest.fixture(scope="module")
def single_process(shards, tmp_path_factory):
    """The reference: the same training in this process, one replica, the same global batch."""
    folder = tmp_path_factory.mktemp("single")
    config = tiny_config("train.train_steps=3", "train.checkpoint_every=2")
    return loop.train(config, shards["train"], str(folder / "run"), str(folder / "ckpt")).model.get_weights()


def _train(config, shards, folder):
    from components.training.run_fn import train_model
    fn_args = types.SimpleNamespace(train_files=[shards["train"]], eval_files=[],
                                    model_run_dir=str(folder / "model_run"))
    first = {}
    result = train_model(config, fn_args, str(folder / "checkpoints"), None,
                         on_step=lambda step, loss: first.setdefault(step, loss))
    return result, first


def _assert_equal(weights, reference, atol):
    assert len(weights) == len(reference)
    for value, expected in zip(weights, reference):
        np.testing.assert_allclose(value, expected, rtol=0, atol=atol)


def test_trainer_on_ray_matches_one_process(ray_config, shards, single_process, tmp_path):
    result, first = _train(ray_config, shards, tmp_path)
    assert (result.steps, result.resumed_from_step, result.num_replicas) == (3, 0, 2)
    assert list(first) == [1]                     # the chief's first step, as loop.train's hook
    _assert_equal(result.model.get_weights(), single_process, 1e-5)
    starts = os.listdir(tmp_path / "model_run" / ray_job.JOB_DIR / ray_job.STARTS)
    assert len(starts) == 1                      # no restart
    assert os.path.isdir(tmp_path / "checkpoints" / ".worker-1")   # the other worker's folder


def _checkpointed(folder, step):
    import tensorflow as tf
    latest = tf.train.latest_checkpoint(str(folder))
    return latest is not None and latest.endswith(f"-{step}")


def _kill_chief_after_checkpoint(folder, done, killed):
    """Waits for both workers' step-2 checkpoints, then SIGKILLs the chief (its pid: the job's
    start note) while it holds still after them."""
    starts = folder / "model_run" / ray_job.JOB_DIR / ray_job.STARTS
    while not done.is_set():
        if (_checkpointed(folder / "checkpoints", 2)
                and _checkpointed(folder / "checkpoints" / ".worker-1", 2)):
            time.sleep(2)   # the input states after the checkpoints
            pid = json.loads((starts / sorted(os.listdir(starts))[0]).read_text())["pid"]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.3)


def test_killed_worker_restarts_the_group_from_its_checkpoint(ray_config, shards, single_process,
                                                              tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(loop.PAUSE_AFTER_CHECKPOINT, "10")
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_chief_after_checkpoint, args=(tmp_path, done, killed))
    killer.start()
    try:
        with caplog.at_level(logging.WARNING, logger="bigtrain.train"):
            result, _ = _train(ray_config, shards, tmp_path)
    finally:
        done.set()
        killer.join()
    assert killed, "the chief was never seen paused after its step-2 checkpoint"
    assert (result.steps, result.resumed_from_step, result.num_replicas) == (3, 2, 2)
    _assert_equal(result.model.get_weights(), single_process, 1e-5)
    assert "Ray restarted the training workers 1 time(s)" in caplog.text
    assert "ckpt-2" in caplog.text
