"""Preemption: SIGTERM (a spot VM's or a scheduler's notice, usually ~30 s) or SIGINT during
training asks the loop to stop after the step in flight; the loop then writes a checkpoint with
its input state and raises TrainingPreempted (components/common/errors.py, exit 75).

The handler only sets a flag (the loop reads it after every step), so the step running when the
signal arrives finishes normally. A second signal restores the default behaviour and re-sends
itself: a second Ctrl-C (or a scheduler's SIGKILL after its grace period) ends the process at
once, as before. Handlers can only be installed from the main thread; elsewhere (a thread of an
orchestrator) training runs without them and says so.

In a multi-worker job a signal may reach one worker only (one VM preempted): the workers agree
after every step (a sum of their flags over the cluster), so all of them stop at the same step
and write the same checkpoint together (the save is collective).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

LOGGER = logging.getLogger("bigtrain.train")
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """with StopRequest() as stop: ... stop.requested (bool), stop.signal_name, stop.since()."""

    def __init__(self):
        self.signal_name, self.received_at, self._previous = "", 0.0, {}

    @property
    def requested(self) -> bool:
        return bool(self.signal_name)

    def since(self) -> float:
        """Seconds since the signal arrived."""
        return time.monotonic() - self.received_at

    def _handle(self, signum, frame) -> None:
        if self.requested:  # the second one: default behaviour, now
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            os.kill(os.getpid(), signum)
            return
        self.signal_name, self.received_at = signal.Signals(signum).name, time.monotonic()
        LOGGER.warning("%s received: stopping after the current step with a checkpoint (a second "
                       "%s stops at once, without one)", self.signal_name, self.signal_name)

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is not threading.main_thread():
            LOGGER.info("training outside the main thread: SIGTERM/SIGINT are not caught "
                        "(a preemption loses the steps since the last checkpoint)")
            return self
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


def agreed_stop(stop: StopRequest, strategy, workers: int) -> bool:
    """True when any worker of the job was asked to stop. One process: its own flag. Several
    workers: the sum of every worker's flag (a collective: every worker calls this after every
    step, in the same order)."""
    if workers <= 1:
        return stop.requested
    import tensorflow as tf
    flag = float(stop.requested)
    votes = strategy.run(lambda: tf.constant(flag))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None).numpy() > 0
