"""A `bigtrain plumbing train-worker` process for the preemption tests, held at one step so that
the test's real signal arrives at a known point:

    python -m tests.training.preempt_child HOLD_STEP GO_FILE train-worker args...

After step HOLD_STEP it prints "HOLD <step>" and waits until this process has received its
SIGTERM/SIGINT (the loop's handler has set its flag) or GO_FILE exists (a worker that is not
signalled, in a multi-worker job), for at most 120 s. Everything else is the real command: the
signal handler, the stop, the checkpoint and the exit status."""

from __future__ import annotations

import os
import signal
import sys
import time

from components.training import loop
from runners.cli import app as cli


def hold_at(step_to_hold: int, go_file: str):
    def on_step(step: int, loss: float) -> None:
        if step != step_to_hold:
            return
        print(f"HOLD {step}", flush=True)
        handler = signal.getsignal(signal.SIGTERM)      # the loop's StopRequest._handle
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if getattr(handler, "__self__", None) is not None and handler.__self__.requested:
                return
            if os.path.exists(go_file):
                return
            time.sleep(0.05)
        raise RuntimeError(f"held at step {step} for 120 s: no signal came")
    return on_step


def main(argv: list[str]) -> int:
    hold_step, go_file, command = int(argv[0]), argv[1], argv[2:]
    real_train = loop.train

    def held_train(*args, **kwargs):
        return real_train(*args, on_step=hold_at(hold_step, go_file), **kwargs)
    loop.train = held_train
    return cli.main(["plumbing", *command])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
