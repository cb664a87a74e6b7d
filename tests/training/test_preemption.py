"""Preemption with real signals: SIGINT/SIGTERM during training finishes the step in flight,
writes a checkpoint with its input state and stops with TrainingPreempted (exit 75); the next run
resumes there and ends with the weights of an uninterrupted run. In process (SIGINT to itself),
one `train-worker` process (resumed by the same command in this process) and two workers of one
job (SIGTERM from the test, to one worker only).

The in-process resume also writes its TensorBoard events into a folder of its own (as the
pipeline's next run writes a new ModelRun): they, its trackers' series and the UI's curves hold
every logged step and validation from step 1, once each, equal to the uninterrupted run's.

Mutations these catch: the input state saved as the puller left it at the stop (it has read ahead
to the next checkpoint step: the resumed weights differ), no checkpoint at the stop (the resume
starts at the last periodic one), handlers left installed after training, a stop not agreed
between workers (the unsignalled worker hangs in the collective save: timeout), the curves not
carried into the resumed run (its events start at step 4), carried twice into the same folder."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import portpicker
import pytest
import tensorflow as tf

from components.common.errors import EXIT_PREEMPTED, TrainingPreempted
from components.tokenizer.byte_level import ByteTokenizer
from components.tracking.fanout import Trackers
from components.training import loop
from components.training.validation import Validation
from pipeline.lineage.web import curves
from runners.cli import app as cli
from tests.support.fork_server import Forked
from tests.training.conftest import SEQ_LEN, WORKER_TIMEOUT_S, tiny_config
from tests.support.numerics import max_difference
from tests.support.multi_worker import _weights, config_args

# Checkpoints at 4 and 8; the stop between them, so the input has been released up to step 4.
OVERRIDES = ("train.train_steps=8", "train.checkpoint_every=4", "train.log_every=1")


def run(tmp_path, shards, name, log=None, **kwargs):
    """loop.train with its checkpoints in <name>/ckpt, its events in <log or name>/run."""
    return loop.train(tiny_config(*OVERRIDES), shards["train"],
                      str(tmp_path / (log or name) / "run"), str(tmp_path / name / "ckpt"), **kwargs)


class Recorder:
    """A tracker (components/tracking/fanout.py Tracker) that keeps what it is given."""
    name, where, run_id = "recorder", "memory", "recorder-1"

    def __init__(self):
        self.points = []          # (tag, step, value), in the order logged

    def log_step(self, step: int, figures: dict) -> None:
        self.points.extend((tag, step, value) for tag, value in figures.items())


def tracked(tmp_path, shards, name, log=None, **kwargs):
    """run() validating every 2 steps, with a Recorder as its tracker: (result, the recorder)."""
    recorder = Recorder()
    checks = Validation([shards["eval"]], ByteTokenizer(), every=2, batches=1, batch_size=8,
                        seq_len=SEQ_LEN)
    return run(tmp_path, shards, name, log, validation=checks, trackers=Trackers([recorder]),
               **kwargs), recorder


def events(log_dir) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of every event under log_dir, as written (TensorFlow's reader;
    duplicates kept: the UI's reader would hide them)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "**", "*.tfevents.*"), recursive=True)):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                out.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, shards):
    """The reference run (validation and a tracker change no weight); its events and series."""
    tmp_path = tmp_path_factory.mktemp("straight")
    result, recorder = tracked(tmp_path, shards, "straight")
    result.events, result.tracked = events(tmp_path / "straight" / "run"), recorder.points
    return result


def signal_self_after(step_to_signal: int, signum: int):
    def on_step(step, loss):
        if step == step_to_signal:
            os.kill(os.getpid(), signum)
    return on_step


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_sigint_stops_with_a_checkpoint_and_the_resume_is_exact(uninterrupted, shards, tmp_path,
                                                                caplog):
    previous = signal.getsignal(signal.SIGINT)
    with pytest.raises(TrainingPreempted, match=r"preempted at step 3 of 8.*ckpt-3.*SIGINT") as err:
        tracked(tmp_path, shards, "preempted", on_step=signal_self_after(2, signal.SIGINT))
    assert err.value.exit_code == EXIT_PREEMPTED == 75
    assert signal.getsignal(signal.SIGINT) is previous     # handlers restored
    with caplog.at_level(logging.INFO, logger="bigtrain.train"):   # events: a folder of its own
        resumed, recorder = tracked(tmp_path, shards, "preempted", log="resumed")
    assert resumed.resumed_from_step == 3 and resumed.steps == 8
    assert "input: restored the iterator saved at step 3" in caplog.text
    assert max_difference(resumed, uninterrupted) <= 1e-6
    assert_same_curves(events(tmp_path / "resumed" / "run"), uninterrupted.events)
    assert sorted((tag, step) for tag, step, _ in recorder.points) == sorted(   # each once
        (tag, step) for tag, step, _ in uninterrupted.tracked)
    shown = curves.read_scalars(str(tmp_path / "resumed" / "run"))
    assert {tag: [s for s, _ in points] for tag, points in shown.items()} == {
        tag: [s for s, _ in points] for tag, points in uninterrupted.events.items()}
    # Run again into the folder the history names (a re-run of the same command): it trains no
    # step and writes none of the carried figures there a second time.
    tracked(tmp_path, shards, "preempted", log="resumed")
    assert_same_curves(events(tmp_path / "resumed" / "run"), uninterrupted.events)


def assert_same_curves(seen: dict, reference: dict) -> None:
    """Every tag at the same steps, once each, in order; the training and validation figures
    equal (tokens/s and MFU are timings)."""
    assert {tag: [s for s, _ in points] for tag, points in seen.items()} == {
        tag: [s for s, _ in points] for tag, points in reference.items()}
    assert seen["loss"][0][0] == 1 and [s for s, _ in seen["validation_loss"]] == [2, 4, 6, 8]
    for tag in ("loss", "learning_rate", "validation_loss", "validation_bits_per_byte"):
        np.testing.assert_allclose([v for _, v in seen[tag]], [v for _, v in reference[tag]],
                                   rtol=1e-6, err_msg=tag)


def test_the_ui_shows_a_step_written_twice_once_with_the_last_value(tmp_path):
    """A step logged again in one folder (a spike rollback's steps; a run resumed into its own
    folder after a kill -9 past its last checkpoint): the curves page draws it once, as last
    written."""
    with tf.summary.create_file_writer(str(tmp_path / "train")).as_default():
        for step, loss in ((1, 5.0), (2, 4.0), (2, 3.5), (3, 3.0)):
            tf.summary.scalar("loss", loss, step=step)
    assert curves.read_scalars(str(tmp_path)) == {"loss": [(1, 5.0), (2, 3.5), (3, 3.0)]}


def examples_folder(shards, tmp_path):
    examples = tmp_path / "examples"
    os.makedirs(examples)
    shutil.copytree(os.path.dirname(shards["train"]), examples / "Split-train")
    return examples


def worker_args(tmp_path, examples, index: int, *overrides) -> list[str]:
    """`train-worker` and its arguments (without `bigtrain plumbing`): out folder w<index>."""
    return ["train-worker", "--examples", str(examples), "--out", str(tmp_path / f"w{index}"),
            "--weights-out", str(tmp_path / f"w{index}.npz"), *config_args(*OVERRIDES, *overrides)]


def start_worker(server, tmp_path, examples, index: int, hold_step: int, env=None,
                 *overrides) -> Forked:
    """A train-worker process, a fork of the session's worker_server (held after hold_step when
    > 0: tests/training/preempt_child.py). Its stdout (the HOLD line and the JSON summary: print
    only) and its stderr (logging, bigtrain's messages, TensorFlow's C++ log) are files of their
    own, so no log line can land after or inside the summary (the flake of 2026-11-27:
    `JSONDecodeError: Extra data`)."""
    args = worker_args(tmp_path, examples, index, *overrides)
    return server.popen_module("tests.training.preempt_child",
                               [str(hold_step), str(tmp_path / "go"), *args],
                               env=dict(env or os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def wait_for_hold(proc: Forked) -> None:
    """Until the worker has printed its HOLD line; fails if it ends first (a guard, no clock
    but the hung-worker one)."""
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while not any(line.startswith("HOLD ") for line in proc.read()[0].splitlines()):
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.read()
            raise AssertionError(f"the worker ended ({proc.returncode}) before its hold:\n"
                                 + out[-3000:] + err[-4000:])
        time.sleep(0.05)


def summary_line(out: str) -> dict:
    """The worker's JSON summary from its stdout (start_worker keeps stderr apart; stdout holds
    only Python's writes: prints and bigtrain's log lines, which start with a time): the one line
    that starts with "{"."""
    found = [line for line in out.splitlines() if line.startswith("{")]
    assert len(found) == 1, out[-3000:]
    return json.loads(found[0])


def test_the_summary_is_read_from_stdout_alone(tmp_path):
    """The flake of 2026-11-27: TensorFlow's C++ log wrote a line after the summary into the merged
    output (the old last-line read raised JSONDecodeError: Extra data). A child that writes to
    stderr after (and while) printing its summary: the summary still reads back whole."""
    child = ("import json, sys\n"
             "sys.stderr.write('E base_collective_executor.cc:249] {partial')\n"
             "print(json.dumps({'resumed_from_step': 3, 'steps': 8}), flush=True)\n"
             "sys.stderr.write(' CoordinationServiceError\\n{not json}\\n')\n")
    script = tmp_path / "child.py"
    script.write_text(child)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    merged, _ = proc.communicate()
    with pytest.raises(json.JSONDecodeError):
        json.loads(merged.splitlines()[-1])        # the old read of the merged output
    with open(tmp_path / "log", "w") as log:      # the files start_worker's forks write
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                stderr=log, text=True)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "CoordinationServiceError" in (tmp_path / "log").read_text()
    assert summary_line(out) == {"resumed_from_step": 3, "steps": 8}


def finish(proc: Forked, timeout=WORKER_TIMEOUT_S) -> tuple[int, str, str]:
    """The process's exit status, stdout and stderr; timeout: a guard against a hung collective
    only (tests/training/conftest.py WORKER_TIMEOUT_S), not a speed check."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return (code, *proc.read())


@pytest.mark.slow   # a train-worker process (a fork of the session's worker_server)
def test_sigterm_to_a_train_worker_exits_75_and_resumes_exactly(uninterrupted, shards, tmp_path,
                                                                capsys, worker_server):
    """The signalled worker is a process of its own; the resume is the same `train-worker`
    command run in this process (cli.main: its exit status and summary line), from the
    checkpoint and input state that process wrote."""
    examples = examples_folder(shards, tmp_path)
    proc = start_worker(worker_server, tmp_path, examples, 0, 2)
    wait_for_hold(proc)
    os.kill(proc.pid, signal.SIGTERM)
    code, out, err = finish(proc)
    text = out + err                           # bigtrain's log is on stdout, its errors on stderr
    assert code == EXIT_PREEMPTED, text[-3000:]
    assert "bigtrain: training preempted at step 3 of 8" in text and "SIGTERM" in text
    capsys.readouterr()
    code = cli.main(["plumbing", *worker_args(tmp_path, examples, 0)])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out[-3000:] + captured.err[-3000:]
    summary = summary_line(out)
    assert summary["resumed_from_step"] == 3 and summary["steps"] == 8
    for value, reference in zip(_weights(tmp_path / "w0.npz"), uninterrupted.model.get_weights()):
        np.testing.assert_allclose(value, reference, rtol=0, atol=1e-6)


@pytest.mark.slow   # four train-worker processes, a two-worker job twice
def test_sigterm_to_one_of_two_workers_stops_both_and_they_resume_exactly(uninterrupted, shards,
                                                                          tmp_path, worker_server):
    """Only worker 1 is signalled (its VM preempted): both stop after the same step, each writes
    its checkpoint and input state, both exit 75; run again, both resume there and end with the
    single-process uninterrupted weights (1e-5, the two-worker tolerance of test_multi_worker)."""
    examples = examples_folder(shards, tmp_path)
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"localhost:{p}" for p in ports]}

    def job(hold_step):
        return [start_worker(worker_server, tmp_path, examples, i, hold_step, dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": i}})),
            "runtime.strategy=multi_worker_mirrored") for i in range(2)]

    procs = job(2)
    for proc in procs:
        wait_for_hold(proc)
    os.kill(procs[1].pid, signal.SIGTERM)
    (tmp_path / "go").write_text("")           # worker 0 goes on without a signal
    results = [finish(proc) for proc in procs]
    texts = [out + err for _, out, err in results]
    assert [code for code, _, _ in results] == [EXIT_PREEMPTED] * 2, texts[0][-3000:]
    assert "SIGTERM" in texts[1] and "a signal to another worker" in texts[0]
    os.remove(tmp_path / "go")
    ports[:] = [portpicker.pick_unused_port() for _ in range(2)]
    cluster["worker"] = [f"localhost:{p}" for p in ports]
    results = [finish(proc) for proc in job(0)]
    assert [code for code, _, _ in results] == [0, 0], (results[0][1] + results[0][2])[-3000:]
    for _, out, _ in results:
        assert summary_line(out)["resumed_from_step"] == 3
        assert "input: restored the iterator saved at step 3" in out
    for index in range(2):
        for value, reference in zip(_weights(tmp_path / f"w{index}.npz"),
                                    uninterrupted.model.get_weights()):
            np.testing.assert_allclose(value, reference, rtol=0, atol=1e-5)
