"""Local runner: TFX LocalDagRunner + Beam DirectRunner, MLMD sqlite, all under the run's home."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

from pipeline.config import Config, save_config


@dataclass(frozen=True)
class LocalPaths:
    home: str
    pipeline_root: str
    metadata_path: str
    serving_dir: str
    runs_dir: str

    @classmethod
    def for_home(cls, home: str, pipeline_name: str) -> "LocalPaths":
        home = os.path.abspath(home)
        return cls(home=home,
                   pipeline_root=os.path.join(home, "pipelines", pipeline_name),
                   metadata_path=os.path.join(home, "metadata.sqlite"),
                   serving_dir=os.path.join(home, "serving"),
                   runs_dir=os.path.join(home, "runs"))


def new_run_dir(paths: LocalPaths, config: Config) -> str:
    """<home>/runs/<timestamp>/ with the resolved config.yaml (and later run.log) inside."""
    run_dir = os.path.join(paths.runs_dir, datetime.datetime.now().strftime("%Y%m%dT%H%M%S.%f"))
    save_config(config, run_dir)
    return run_dir


def run_local(config: Config, paths: LocalPaths | None = None, run_dir: str | None = None,
              until: str | None = None) -> str:
    """Run the pipeline once (up to and including stage `until`, when given); returns this run's
    folder (resolved config inside).

    Raises whatever the failing component raised (after TFX has recorded it in MLMD)."""
    from tfx.orchestration import metadata
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline.pipeline import create_pipeline

    paths = paths or LocalPaths.for_home(config.paths.home, config.paths.pipeline_name)
    run_dir = run_dir or new_run_dir(paths, config)
    os.makedirs(paths.pipeline_root, exist_ok=True)
    pipeline = create_pipeline(
        config,
        pipeline_root=paths.pipeline_root,
        serving_dir=paths.serving_dir,
        metadata_connection_config=metadata.sqlite_metadata_connection_config(paths.metadata_path),
        beam_pipeline_args=list(config.runtime.beam_args), until=until)
    LocalDagRunner().run(pipeline)
    return run_dir
