"""Fault injection that tests set from outside a process: the pause the kill -9 tests set in the
Trainer's loop (after a checkpoint) and in the push (before the publish), so a test acts while the
process is known to be at that point (pause_if_set)."""

from __future__ import annotations

import os
import time


def pause_if_set(variable: str) -> None:
    """Fault-injection seam: with $variable set (seconds), this process holds still that long, so
    a test acts while the process is known to be at this point, whatever the machine's speed."""
    if os.environ.get(variable):
        time.sleep(float(os.environ[variable]))
