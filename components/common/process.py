"""Whether the process that left a record (a home lock's holder, a push claim, a push staging
folder) still runs. The home lock (runners/local/lock.py) and the pusher (components/push/) both ask,
so the one probe lives here, below both.
The fault-injection pause the kill -9 tests set lives in faults.py."""

from __future__ import annotations

import os
import socket


def process_alive(holder: dict) -> bool | None:
    """True/False for a holder ({"pid", "host"}) on this host; None when it ran on another host
    (cannot tell). A pid we may not signal, or a record without a usable pid, counts as alive:
    only a pid the kernel says is gone is dead."""
    if holder.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, ValueError, TypeError):
        return True
    return True


def this_process() -> dict:
    """The record process_alive reads back: this process's pid and host."""
    return {"pid": os.getpid(), "host": socket.gethostname()}
