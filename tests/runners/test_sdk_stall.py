"""A Beam stage whose SDK worker connects and then makes no progress fails with SdkWorkerError
naming the pool, the stage and runtime.sdk_worker_stall_s, within the setting and some slack;
a stage that is slow but progressing runs to the end (runners/sdk_stall.py).

The pool is real (tests/support/beam_worker_pool.py) and so is the stall: a step that, after a
few elements, sleeps for an hour (stuck in user code) or stops its own worker process with
SIGSTOP (tests/support/stalling_steps.py). Each stage runs in a child process the test kills after GUARD_S: without the watchdog
the stage's Beam job waits forever (Beam's job thread is not a daemon, so even the interpreter's
exit would hang), and the test then fails naming the hang instead of hanging the suite.
Catches: no watchdog, a watchdog that counts a stuck DoFn's growing execution time as progress
or one that only counts bundles (it would kill the slow stage), a message without the endpoint,
a stalled worker left running."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from components.common.errors import SdkWorkerError
from tests.support import stalling_steps
from tests.support.beam_worker_pool import ROOT, portable_args, worker_pids, worker_pool

pytestmark = pytest.mark.slow

STALL_S = 10.0         # runtime.sdk_worker_stall_s in these stages (a worker's first answer
                       # to a progress request took 4 s on the 2-core VM: it is starting)
SLACK_S = 60.0         # the poll, the pool's 10 s SIGTERM grace for a stopped worker, a busy
                       # VM (measured: 10-25 s on the quiet 2-core VM)
GUARD_S = 180          # the child's whole life: pool worker start, probe, the stage
SLOW_STALL_S = 20.0    # the slow stage's setting: twice the others, so a worker slow to answer
ELEMENTS = 50          # its first progress request on a busy VM is not a stall; its 50 elements
                       # take 25 s in all, 1.25 times the setting
_CHILD = "from tests.runners.test_sdk_stall import child; child()"


def child():
    """The child: one stage (`python -c _CHILD PORT STEP STALL_S OUTCOME_FILE`) made as a TFX Beam
    executor makes it, during a run on the pool; writes its outcome as JSON to OUTCOME_FILE (not
    to its output, where Beam's threads' tracebacks on stderr can split the line: seen in CI)."""
    import apache_beam as beam

    from runners.sdk_workers import probing_each_beam_stage
    from tests.runners.test_sdk_workers import stage_pipeline
    port, step, stall_s = int(sys.argv[1]), getattr(stalling_steps, sys.argv[2]), float(sys.argv[3])
    with probing_each_beam_stage(portable_args(port), 120, stall_s):
        pipeline = stage_pipeline(portable_args(port))
        start = time.monotonic()
        try:
            with pipeline as p:
                _ = p | beam.Create(range(ELEMENTS)) | beam.Map(step)
            outcome = {"error": None}
        except Exception as err:  # reported, type and all: the test says which it expected
            outcome = {"error": str(err), "type": type(err).__name__}
        outcome["seconds"] = time.monotonic() - start
    with open(sys.argv[4], "w") as fh:
        json.dump(outcome, fh)


def run_stage(port, step, tmp_path, stall_s=STALL_S):
    """(outcome, output) of the child's stage; fails the test when it outlives GUARD_S."""
    outcome_file = str(tmp_path / "outcome.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(port), step, str(stall_s), outcome_file], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the {step} stage hung: no outcome within {GUARD_S} s\n{out[-3000:]}")
    assert os.path.exists(outcome_file) and proc.returncode == 0, (
        f"exit {proc.returncode}\n{out[:4000]}\n...\n{out[-3000:]}")
    with open(outcome_file) as fh:
        return json.load(fh), out


def no_workers_left(pool, timeout=30.0) -> bool:
    """The pool's workers all gone (a finished job's worker exits once its job service stops)."""
    deadline = time.monotonic() + timeout
    while worker_pids(pool) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not worker_pids(pool)


@pytest.mark.parametrize("step", ["stuck", "stopped"])
def test_a_worker_that_stalls_after_connecting_fails_the_stage_naming_the_pool(step, tmp_path):
    log = tmp_path / "pool.log"
    with worker_pool(str(log)) as (port, pool):
        outcome, out = run_stage(port, step, tmp_path)
        assert outcome["error"] and outcome["type"] == SdkWorkerError.__name__, (outcome, out[-3000:])
        assert (f"the SDK worker from the pool at localhost:{port} made no progress in "
                f"StatisticsGen for ") in outcome["error"], outcome
        assert "runtime.sdk_worker_stall_s=10" in outcome["error"], outcome
        assert "stuck in user code" in outcome["error"] and "pool's log" in outcome["error"]
        assert STALL_S <= outcome["seconds"] < STALL_S + SLACK_S, outcome
        assert no_workers_left(pool), psutil.Process(pool.pid).children(recursive=True)
    # The probe's worker and the stage's: the stalled one was stopped through the pool.
    assert log.read_text().count("Starting worker with command") == 2


def test_a_slow_but_progressing_stage_is_not_stopped(tmp_path):
    with worker_pool(str(tmp_path / "pool.log")) as (port, _):
        outcome, out = run_stage(port, "slow", tmp_path, SLOW_STALL_S)
    assert outcome["error"] is None, out[-3000:]
    assert outcome["seconds"] >= ELEMENTS * stalling_steps.SLOW_S >= 1.25 * SLOW_STALL_S, outcome
