"""The console shows one line per stage failure (bigtrain's own, runners/local/run.py): the record
TFX's launcher logs at ERROR before re-raising (`Execution N failed.`, launcher.py:619) stays in
the run's log file and off the console; other errors still reach the console."""

import io
import logging
import sys

import pytest

from absl import logging as absl_logging
from tfx.orchestration.portable import launcher

from runners.local.logs import configure_logging, remove_file_handlers


@pytest.fixture(autouse=True)
def _restore_logging():
    """configure_logging sets process-wide levels and filters: put them back for other tests."""
    root, absl_handler = logging.getLogger(), absl_logging.get_absl_handler()
    saved = [(h, h.level, list(h.filters)) for h in root.handlers + [absl_handler]]
    level = root.level
    yield
    root.setLevel(level)
    for handler, handler_level, filters in saved:
        handler.setLevel(handler_level)
        handler.filters[:] = filters


def _console(monkeypatch) -> io.StringIO:
    """The console absl writes to, whatever the process did before: before absl's flags are
    parsed it writes to sys.stderr as of the record; after (an earlier test in this worker may
    have parsed them) to its handler's own stream, fixed when the handler was made. Both point
    here (the test was order-dependent when only sys.stderr was replaced). Called in the test's
    body: pytest puts its own sys.stderr back between a fixture's set-up and the test."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(absl_logging.get_absl_handler().python_handler, "stream", stream)
    return stream


def _log_from(filename: str, message: str, *args) -> None:
    """absl.logging.error called from code whose file is `filename`: absl and logging take the
    record's path from the caller's frame, exactly as for TFX's own call."""
    code = compile("logging.error(message, *args)", filename, "exec")
    exec(code, {"logging": absl_logging, "message": message, "args": args})  # noqa: S102


def test_the_launchers_execution_failed_line_stays_off_the_console(tmp_path, monkeypatch):
    console = _console(monkeypatch)
    log_path = str(tmp_path / "run.log")
    configure_logging(False, log_path)
    try:
        _log_from(launcher.__file__, "Execution %d failed.", 7)
        _log_from(__file__, "something else broke in %s", "a stage")
    finally:
        remove_file_handlers(log_path)
    assert "Execution 7 failed." not in console.getvalue()
    assert "something else broke in a stage" in console.getvalue()
    assert "Execution 7 failed." in open(log_path, encoding="utf-8").read()


def test_verbose_shows_the_launchers_line(monkeypatch):
    console = _console(monkeypatch)
    configure_logging(False)
    configure_logging(True)
    _log_from(launcher.__file__, "Execution %d failed.", 8)
    assert "Execution 8 failed." in console.getvalue()
