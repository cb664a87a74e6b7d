"""Ctrl-C: a command interrupted by KeyboardInterrupt exits 130 (`EXIT_INTERRUPTED`, the code a
shell gives a process ended by SIGINT) with one line on stderr, the traceback only under -v
(docs/operations.md, exit codes). The command is `bigtrain config` with its work replaced by an
interrupt: nothing imports TensorFlow."""

from __future__ import annotations

import pytest

from runners import cli


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
