"""Ctrl-C and SIGTERM outside training: both end `bigtrain run` the same way, with one line, the
documented exit code (130, 143), the stopped stage recorded failed in MLMD with what stopped it
(`bigtrain lineage why` says so) and no temp folder left behind.

Python turns SIGINT into KeyboardInterrupt; SIGTERM would kill the process where it stands (Beam's
`beam-pipeline-temp*` folders stay in the temp directory). `terminate_raises` makes SIGTERM raise
Terminated, a KeyboardInterrupt, so both unwind through every library's cleanup. Training
installs its own handlers for both signals while it runs (components/training/stopping.py: a
checkpoint, then exit 75) and restores these after."""

from __future__ import annotations

import contextlib
import signal
import threading

from components.common.errors import (EXIT_INTERRUPTED, EXIT_TERMINATED, Interrupted, Terminated,
                                      in_cause_chain)


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def terminate_raises():
    """Within: SIGTERM raises Terminated in the main thread (elsewhere nothing changes: handlers
    can only be set from the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_of(error: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C / SIGTERM that stopped a stage: error itself, or in the cause chain of the
    exception TFX or Beam raised around it."""
    return in_cause_chain(error, KeyboardInterrupt)


def interrupted_error(interrupt: KeyboardInterrupt, stage: str | None, home: str) -> Interrupted:
    """The named error of an interrupted run: which signal, which stage, what to do next."""
    terminated = isinstance(interrupt, Terminated)
    name = "SIGTERM" if terminated else "SIGINT (Ctrl-C)"
    where = f" during {stage}" if stage else ""
    return Interrupted(f"interrupted by {name}{where}: the run is recorded as failed there "
                       f"(bigtrain lineage why --home {home}); `bigtrain run` again re-runs that "
                       f"stage, the finished ones come from the cache",
                       EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)
