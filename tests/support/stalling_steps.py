"""Steps (Beam Map functions) for the stall tests (tests/runners/test_sdk_stall.py), in a module
that imports nothing heavy: an SDK worker imports it to run them, and its import time counts
as the bundle's first seconds without progress."""

import os
import signal
import time

SLOW_S = 1.0           # per element of the slow step


def stuck(x):
    """Stuck in user code after three elements: an hour's sleep."""
    if x == 3:
        time.sleep(3600)
    return x


def stopped(x):
    """The worker process stops itself (SIGSTOP) after three elements."""
    if x == 3:
        os.kill(os.getpid(), signal.SIGSTOP)
    return x


def slow(x):
    """Slow but progressing: SLOW_S per element."""
    time.sleep(SLOW_S)
    return x
