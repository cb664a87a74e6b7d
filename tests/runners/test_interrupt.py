"""Ctrl-C: a command interrupted by KeyboardInterrupt exits 130 (`EXIT_INTERRUPTED`, the code a
shell gives a process ended by SIGINT) with one line on stderr, the traceback only under -v
(docs/operations.md, exit codes). The command is `bigtrain config` with its work replaced by an
interrupt: nothing imports TensorFlow."""

from __future__ import annotations

import pytest

from runners.cli import app as cli


def interrupted(args):
    raise KeyboardInterrupt


@pytest.fixture
def config_interrupted(monkeypatch):
    monkeypatch.setattr(cli, "cmd_config", interrupted)


def test_interrupt_exits_130_with_one_line(config_interrupted, capsys):
    assert cli.main(["config"]) == 130
    err = capsys.readouterr().err
    assert err == "bigtrain: interrupted\n"


def test_interrupt_traceback_only_with_verbose(config_interrupted, capsys):
    assert cli.main(["-v", "config"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyboardInterrupt" in err
    assert err.endswith("bigtrain: interrupted\n")


# SIGINT's handler is set here, in the child, as Python sets it at start-up when SIGINT is not
# ignored: a test run started in the background of a non-interactive shell (`make test &`)
# ignores SIGINT, and an ignored SIGINT is inherited through exec (Python then installs no
# handler: seen, the child slept on). Not with Popen's preexec_fn: that forks the xdist worker
# and runs Python code there before the exec, and gRPC's fork handlers in that copy (the worker
# had imported it) wrote "Epoll1Poller ... epoll_wait error: Bad file descriptor" onto the
# child's stderr (CI, 2026-11-28 21:24).
REAL_SIGINT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from runners.cli import app as cli

def wait_for_ctrl_c(args):
    print("working", flush=True)
    time.sleep(120)          # a real SIGINT ends this wait (KeyboardInterrupt from the handler)
    return 0

cli.cmd_config = wait_for_ctrl_c
sys.argv = ["bigtrain", "config"]
cli.console_main()           # the `bigtrain` console script's own entry point
"""


def test_a_real_sigint_to_the_bigtrain_process_exits_130():
    """The process's exit status, not main()'s return value: a real SIGINT delivered while a
    command works, through Python's default handler and the console script (console_main,
    fs.exit_process). Caught: KeyboardInterrupt escaping main (Python then re-kills itself with
    SIGINT: status -2), or the console script exiting 0 or 1."""
    import os
    import signal
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, "-c", REAL_SIGINT], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=repo,
                             env=dict(os.environ, PYTHONPATH=repo))
    try:
        assert child.stdout.readline().strip() == "working"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 130, err
    assert err == "bigtrain: interrupted\n"
