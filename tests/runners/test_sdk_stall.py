"""A Beam stage whose SDK worker connects and then makes no progress fails with SdkWorkerError
naming the pool, the stage and runtime.sdk_worker_stall_s, not before the setting and on time by
the watch's own count (no wall-clock bound but a hang guard: the VM may be loaded);
a stage that is slow but progressing runs to the end (runners/beam/sdk_stall.py).

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
import re
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

# Load-proof (issue 41): a stall is the stuck stages' expected outcome, and a loaded VM can only
# make it later, never earlier; the slow stage's setting is far above what its progress needs.
STALL_S = 10.0         # runtime.sdk_worker_stall_s in the stuck stages (a stall at any time is
                       # theirs to report: a worker slow to start on a busy VM stalls them too)
GUARD_S = 420          # the child's whole life (pool worker start, probe, the stage): a hang guard
                       # only (the quiet 2-core VM: 25-50 s), never a speed check
SLOW_STALL_S = 60.0    # the slow stage's setting: 60 x its 1 s between elements, 12 x its 5 s
                       # progress poll and 15 x a starting worker's first answer (4 s measured)
SLOW_ELEMENTS = 80     # of SLOW_S (1 s) each: one bundle of 80 s, 1.33 times the setting, so a
                       # watchdog counting bundles only would stop it
ELEMENTS = 50          # the stuck stages' (they stall at element 3)
_CHILD = "tests.runners.test_sdk_stall:child"   # its argv: -c PORT STEP STALL_S OUTCOME_FILE


def child():
    """The child: one stage (_CHILD with PORT STEP STALL_S OUTCOME_FILE) made as a TFX Beam
    executor makes it, during a run on the pool; writes its outcome as JSON to OUTCOME_FILE (not
    to its output, where Beam's threads' tracebacks on stderr can split the line: seen in CI)."""
    import apache_beam as beam

    from runners.beam.sdk_workers import probing_each_beam_stage
    from tests.support.beam_stages import stage_pipeline
    port, step, stall_s = int(sys.argv[1]), getattr(stalling_steps, sys.argv[2]), float(sys.argv[3])
    elements = SLOW_ELEMENTS if step is stalling_steps.slow else ELEMENTS
    with probing_each_beam_stage(portable_args(port), 120, stall_s):
        pipeline = stage_pipeline(portable_args(port))
        start = time.monotonic()
        try:
            with pipeline as p:
                _ = p | beam.Create(range(elements)) | beam.Map(step)
            outcome = {"error": None}
        except Exception as err:  # reported, type and all: the test says which it expected
            outcome = {"error": str(err), "type": type(err).__name__}
        outcome["seconds"] = time.monotonic() - start
    with open(sys.argv[4], "w") as fh:
        json.dump(outcome, fh)


def run_stage(server, port, step, tmp_path, stall_s=STALL_S):
    """(outcome, output) of the child's stage, a fork of the session's bigtrain_server (Beam and
    TensorFlow imported) in a session of its own; fails the test when it outlives GUARD_S."""
    outcome_file, output = str(tmp_path / "outcome.json"), str(tmp_path / "child.out")
    proc = server.popen(_CHILD, ["-c", str(port), step, str(stall_s), outcome_file],
                        dict(os.environ), interpreter_exit=True, output=output, new_session=True)
    try:
        proc.wait(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the {step} stage hung: no outcome within {GUARD_S} s\n{proc.read()[0][-3000:]}")
    out = proc.read()[0]   # stdout and stderr: one file
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
def test_a_worker_that_stalls_after_connecting_fails_the_stage_naming_the_pool(step, tmp_path,
                                                                              bigtrain_server):
    log = tmp_path / "pool.log"
    with worker_pool(str(log)) as (port, pool):
        outcome, out = run_stage(bigtrain_server, port, step, tmp_path)
        assert outcome["error"] and outcome["type"] == SdkWorkerError.__name__, (outcome, out[-3000:])
        assert (f"the SDK worker from the pool at localhost:{port} made no progress in "
                f"StatisticsGen for ") in outcome["error"], outcome
        assert "runtime.sdk_worker_stall_s=10" in outcome["error"], outcome
        assert "stuck in user code" in outcome["error"] and "pool's log" in outcome["error"]
        # Not before the setting (monotonic time: load only delays it); on time by the watch's
        # own count, which the message names: its poll (STALL_S / 6) past the setting, with room
        # for a starved thread, not the whole job's wall time (pool, probe, teardown).
        assert outcome["seconds"] >= STALL_S, outcome
        idle = float(re.search(r"made no progress in \w+ for (\d+) s", outcome["error"]).group(1))
        assert STALL_S <= idle <= 2 * STALL_S, outcome
        assert no_workers_left(pool), psutil.Process(pool.pid).children(recursive=True)
    # The probe's worker and the stage's: the stalled one was stopped through the pool.
    assert log.read_text().count("Starting worker with command") == 2


def test_a_slow_but_progressing_stage_is_not_stopped(tmp_path, bigtrain_server):
    with worker_pool(str(tmp_path / "pool.log")) as (port, _):
        outcome, out = run_stage(bigtrain_server, port, "slow", tmp_path, SLOW_STALL_S)
    assert outcome["error"] is None, out[-3000:]
    assert outcome["seconds"] >= SLOW_ELEMENTS * stalling_steps.SLOW_S >= 1.25 * SLOW_STALL_S, outcome
