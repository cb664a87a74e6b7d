"""runtime.strategy=parameter_server on one machine: 2 ps and 2 worker tasks (`bigtrain plumbing
ps-task`) and the chief (`bigtrain plumbing train-worker`), each a process of its own on loopback
ports, forks of the session's fork server (tests/training/conftest.py worker_server).

The references are counts, not a second training: N applied steps must count exactly N in the
step counter, in AdamW's iterations and (times the tokens of a global batch) in the tokens seen,
though two workers update them concurrently; a resumed chief must hold the checkpoint's weights
bit for bit and count on from its step. The cluster (ps and workers) is started once per module;
the killed-worker test kills one of its workers, so it runs last."""

import json
import os
import signal
import time

import numpy as np
import pytest

from tests.support.multi_worker import BIGTRAIN, _examples, config_args
from tests.support.ps_cluster import _env, cluster  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

TOKENS_PER_STEP = 16 * 32          # TINY_OVERRIDES: global batch 16 of seq_len 32
STRATEGY = "runtime.strategy=parameter_server"
# A guard against a chief hung on a dead worker, not a speed check: the 50 steps left after the
# kill and the export took 20-30 s of the whole test's wall on the loaded 2-core VM (2026-12-07).
AFTER_KILL_S = 300


def _start_chief(server, cluster, examples, out, *overrides):
    return server.start(BIGTRAIN, [
        "bigtrain", "plumbing", "train-worker", "--examples", str(examples), "--out", str(out),
        "--weights-out", str(out) + ".npz", *config_args(*overrides, STRATEGY)],
        _env(cluster["spec"], "chief", 0))


def _finish(server, started) -> dict:
    code, out, err = server.wait(started)
    assert code == 0, (out + err)[-4000:]
    return dict(json.loads(out.strip().splitlines()[-1]), log=out + err)


def _run_chief(server, cluster, examples, out, *overrides) -> dict:
    return _finish(server, _start_chief(server, cluster, examples, out, *overrides))


@pytest.fixture(scope="module")
def first_job(shards, tmp_path_factory, worker_server, cluster):
    """120 steps, a checkpoint at 60 and 120, both workers stepping concurrently (at 40 steps
    the Keras counter lost no increment on 2026-12-07: too few overlaps to show the race)."""
    folder = tmp_path_factory.mktemp("ps_job")
    examples = _examples(shards, folder)
    summary = _run_chief(worker_server, cluster, examples, folder / "chief",
                         "train.train_steps=120", "train.checkpoint_every=60")
    return dict(folder=folder, examples=examples, summary=summary,
                weights=dict(np.load(str(folder / "chief") + ".npz")))


def test_counters_are_exact_under_concurrent_workers(first_job):
    """Fails with Keras' own assign_add for the iterations (parameter_server.exact_iterations
    removed): a read and a write, interleaved by the two workers, lose increments."""
    summary = first_job["summary"]
    assert summary["workers"] == 2 and summary["scheduled"] == 120
    assert (summary["steps"], summary["iterations"]) == (120, 120)
    assert summary["tokens_seen"] == 120 * TOKENS_PER_STEP
    assert np.isfinite(summary["final_loss"])
    assert os.path.exists(first_job["folder"] / "chief" / "serving_model" / "saved_model.pb")


def test_resume_restores_weights_and_step_and_counts_no_step_twice(first_job, worker_server,
                                                                   cluster):
    """A chief started again over the finished run's folder resumes at its last checkpoint
    (step 120) and trains nothing: its weights are the checkpoint's, bit for bit. Asked for 140
    steps it schedules 20 more and counts on from 120, not from 0 and not 120 + 120."""
    folder, examples = first_job["folder"], first_job["examples"]
    again = _run_chief(worker_server, cluster, examples, folder / "chief",
                       "train.train_steps=120", "train.checkpoint_every=60")
    assert (again["resumed_from_step"], again["scheduled"], again["steps"]) == (120, 0, 120)
    restored = np.load(str(folder / "chief") + ".npz")
    for name, value in first_job["weights"].items():
        np.testing.assert_array_equal(restored[name], value)
    more = _run_chief(worker_server, cluster, examples, folder / "chief",
                      "train.train_steps=140", "train.checkpoint_every=60")
    assert (more["resumed_from_step"], more["scheduled"]) == (120, 20)
    assert (more["steps"], more["iterations"]) == (140, 140)
    assert more["tokens_seen"] == 140 * TOKENS_PER_STEP


def test_the_coordinator_survives_a_killed_worker(first_job, worker_server, cluster):
    """Worker 1 is killed (SIGKILL) once the first checkpoint is written; the chief's
    ClusterCoordinator runs the lost steps on worker 0 and the run ends at its step count."""
    out = first_job["folder"] / "killed"
    chief = _start_chief(worker_server, cluster, first_job["examples"], out,
                         "train.train_steps=60", "train.checkpoint_every=10")
    state_file = out / "checkpoints" / "checkpoint"
    deadline = time.monotonic() + 600
    while not state_file.exists():
        assert worker_server.poll(chief) is None, "the chief ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within 600 s"
        time.sleep(0.5)
    os.kill(cluster["tasks"][("worker", 1)].pid, signal.SIGKILL)
    deadline = time.monotonic() + AFTER_KILL_S
    while worker_server.poll(chief) is None:
        if time.monotonic() > deadline:
            worker_server.kill([chief])
            pytest.fail(f"the chief still ran {AFTER_KILL_S} s after worker 1 was killed")
        time.sleep(0.5)
    summary = _finish(worker_server, chief)
    assert summary["steps"] >= 60          # a step re-run after the kill counts once per update
    # a worker killed between the two increments of one step leaves them one apart at most
    assert abs(summary["tokens_seen"] // TOKENS_PER_STEP - summary["steps"]) <= 1
    assert summary["scheduled"] >= 60 - 10
