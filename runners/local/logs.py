"""Logging set-up for every `bigtrain` command: the console shows bigtrain's own progress lines
(everything with -v); a run's log file gets everything at INFO, TFX and Beam included, for
`bigtrain lineage why`."""

from __future__ import annotations

import logging
import os
import sys

from components.common.errors import DiskFullError


class StageFailedLine(logging.Filter):
    """TFX's launcher logs `Execution N failed.` at ERROR before it re-raises the stage's error,
    and Beam logs a Ctrl-C or SIGTERM inside a bundle as an error with its traceback; the run
    then prints its own one line for either (runners/local/run.py), as it does for a full disk that
    a Beam step named (DiskFullError), so the console drops these
    records (the run's log file keeps them; -v shows them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], (KeyboardInterrupt, DiskFullError)):
            return False   # a full disk: the run's one line names the folder (exit 7)
        if str(record.msg).startswith("KeyboardInterrupt"):
            return False
        return not (record.msg == "Execution %d failed."
                    and os.path.basename(record.pathname) == "launcher.py")


class RunLogHandler(logging.FileHandler):
    """The run's log file. When a write to it fails (a full disk), the console says so once,
    naming the file, and the file gets no more lines: logging's default would print a traceback
    for every later record, and the close at the run's end would raise again."""

    failed: OSError | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed is None:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self._stop(error)

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as error:
            self._stop(error)

    def _stop(self, error: OSError) -> None:
        if self.failed is not None:
            return
        self.failed = error
        print(f"bigtrain: note: the run's log {self.baseFilename} could not be written "
              f"({error.strerror or error}); it ends there (the console goes on)",
              file=sys.stderr, flush=True)
        stream, self.stream = self.stream, None
        try:
            stream.close()   # flushes what is buffered again: the same failure, said above
        except OSError as again:
            if again.errno != error.errno:
                raise


def configure_logging(verbose: bool, log_path: str | None = None) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1" if verbose else "3")
    import warnings
    if not verbose:
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
    from absl import logging as absl_logging
    absl_logging.set_verbosity(absl_logging.INFO)
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    absl_logging.use_absl_handler()
    for handler in root.handlers + [absl_logging.get_absl_handler()]:  # console handlers
        handler.setLevel(logging.INFO if verbose else logging.ERROR)
        for old in [f for f in handler.filters if isinstance(f, StageFailedLine)]:
            handler.removeFilter(old)
        if not verbose:
            handler.addFilter(StageFailedLine())
    for name in ("apache_beam", "tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.INFO)
    formatter = logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s", "%H:%M:%S")
    if log_path:
        file_handler = RunLogHandler(log_path, encoding="utf-8")
        file_handler.setLevel(logging.INFO)
        file_handler.setFormatter(formatter)
        root.addHandler(file_handler)
    ours = logging.getLogger("bigtrain")
    if not any(getattr(h, "_bigtrain_console", False) for h in ours.handlers):
        console = logging.StreamHandler(sys.stdout)
        console._bigtrain_console = True
        console.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
        ours.addHandler(console)
    ours.setLevel(logging.INFO)  # propagates to the root logger's file handler too


def remove_file_handlers(log_path: str) -> None:
    """Close a run's log file handler (several runs in one process, e.g. the tests)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler) and handler.baseFilename == os.path.abspath(log_path):
            root.removeHandler(handler)
            handler.close()
