"""The home of local runs, the one place that knows its layout (config paths.home):

  <home>/.bigtrain.lock             LOCK_FILE: one writer per home (runners/local/lock.py)
  <home>/metadata.sqlite            the MLMD store unless the metadata section says otherwise
                                    (runners/local/metadata.py; its name: config SQLITE_FILE)
  <home>/runs/<run id>/run.log      RUNS_FOLDER, RUN_LOG: one folder per `bigtrain run`, with its
  <home>/runs/<run id>/config.yaml  log and its resolved config (components/config save_config)
  <home>/pipelines/<pipeline name>/ PIPELINES_FOLDER: the pipeline root, unless
                                    orchestrator.pipeline_root names another place
  <home>/serving/                   SERVING_FOLDER: where runs push, unless
                                    orchestrator.serving_dir names another place

Run state (lock, runs, sqlite) always stays under the home; the pipeline root and the serving
folder may be a path elsewhere or an s3:// or gs:// URI.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from components.storage import fs
from components.common.errors import HomeError
from components.config import Config
from components.config.tree import SQLITE_FILE

LOCK_FILE = ".bigtrain.lock"
RUNS_FOLDER, RUN_LOG = "runs", "run.log"
PIPELINES_FOLDER, SERVING_FOLDER = "pipelines", "serving"


@dataclass(frozen=True)
class LocalPaths:
    home: str
    pipeline_root: str
    serving_dir: str
    runs_dir: str

    @classmethod
    def for_home(cls, home: str, pipeline_name: str, pipeline_root: str = "",
                 serving_dir: str = "") -> "LocalPaths":
        """Run state (lock, runs, sqlite) always under the home; the pipeline root and serving
        folder where orchestrator.pipeline_root / serving_dir say (a path or s3://, gs://),
        under the home when empty."""
        home = os.path.abspath(home)
        return cls(home=home,
                   pipeline_root=(_resolve(pipeline_root)
                                  or os.path.join(home, PIPELINES_FOLDER, pipeline_name)),
                   serving_dir=_resolve(serving_dir) or default_serving_dir(home),
                   runs_dir=os.path.join(home, RUNS_FOLDER))

    @classmethod
    def for_config(cls, config: Config) -> "LocalPaths":
        return cls.for_home(config.paths.home, config.paths.pipeline_name,
                            config.orchestrator.pipeline_root, config.orchestrator.serving_dir)

    def remote(self) -> list[str]:
        return [p for p in (self.pipeline_root, self.serving_dir) if fs.is_remote(p)]

    def run_dir(self, run_id: str) -> str:
        return os.path.join(self.runs_dir, run_id)

    def run_log(self, run_id: str) -> str:
        return os.path.join(self.run_dir(run_id), RUN_LOG)


def with_home_run_log(why: dict, paths: LocalPaths) -> dict:
    """`lineage why`'s answer with the run's log from the home's layout when MLMD recorded none:
    a run killed before its end (kill -9, power loss) records its log only when a later run
    sweeps it, yet its <home>/runs/<id>/run.log is there from its first line."""
    path = paths.run_log(why["run_id"])
    if why.get("log") or not os.path.isfile(path):
        return why
    return dict(why, log=path, run_dir=why.get("run_dir") or paths.run_dir(why["run_id"]),
                failed=[dict(f, log=f.get("log") or path) for f in why["failed"]])


def _resolve(path: str) -> str:
    return path if not path or fs.is_remote(path) else os.path.abspath(path)


def default_serving_dir(home: str) -> str:
    """Where runs push when orchestrator.serving_dir is empty."""
    return os.path.join(os.path.abspath(home), SERVING_FOLDER)


def lock_path(home: str) -> str:
    return os.path.join(home, LOCK_FILE)


def default_sqlite_path(home: str) -> str:
    return os.path.join(home, SQLITE_FILE)


def readable_folders(home: str | None, pipeline_root: str | None = None) -> list[str]:
    """The folders `bigtrain ui` may read files from: <home>/runs (run logs) and the pipeline
    root (artifacts, TensorBoard events; default <home>/pipelines), symlinks resolved. Not the
    home itself: the sqlite store and the lock file are never served."""
    folders = [os.path.join(home, RUNS_FOLDER)] if home else []
    if pipeline_root or home:
        folders.append(pipeline_root or os.path.join(home, PIPELINES_FOLDER))
    return [os.path.realpath(f) for f in folders]


def remove_if_empty(folder: str) -> None:
    """Remove a folder a refused run created and left empty (the home, once the lock file is
    removed on release; its runs/ folder when the run's own could not be written)."""
    if os.path.isdir(folder) and not os.listdir(folder):
        os.rmdir(folder)


def check_home(home: str) -> None:
    """The home exists (or is created) and is writable: a named error otherwise."""
    if os.path.exists(home) and not os.path.isdir(home):
        raise HomeError(f"home {home} is not a directory")
    try:
        os.makedirs(home, exist_ok=True)
    except OSError as err:
        raise HomeError(f"cannot create home {home}: {err.strerror}"
                        + (" (a parent is a file)" if err.errno == errno.ENOTDIR else "")) from None
    if not os.path.isdir(home):
        raise HomeError(f"home {home} is not a directory")
    probe = os.path.join(home, f".write-test-{os.getpid()}")
    try:
        with open(probe, "w") as fh:
            fh.write("ok")
    except OSError as err:   # a full disk fails the close: the probe exists, and must not stay
        if os.path.exists(probe):
            os.remove(probe)
        raise HomeError(f"home {home} is not writable: {err.strerror}") from None
    os.remove(probe)
