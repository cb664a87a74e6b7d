"""Logging set-up for every `bigtrain` command: the console shows bigtrain's own progress lines
(everything with -v); a run's log file gets everything at INFO, TFX and Beam included, for
`bigtrain lineage why`."""

from __future__ import annotations

import logging
import os
import sys


class StageFailedLine(logging.Filter):
    """TFX's launcher logs `Execution N failed.` at ERROR before it re-raises the stage's error,
    and Beam logs a Ctrl-C or SIGTERM inside a bundle as an error with its traceback; the run
    then prints its own one line for either (runners/local.py), so the console drops these
    records (the run's log file keeps them; -v shows them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt):
            return False
        if str(record.msg).startswith("KeyboardInterrupt"):
            return False
        return not (record.msg == "Execution %d failed."
                    and os.path.basename(record.pathname) == "launcher.py")


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
        file_handler = logging.FileHandler(log_path, encoding="utf-8")
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
