"""One way to run the pipeline in a test: `bigtrain run` in-process (runners/cli/app.py main) in a
home of its own, with --set overrides, and typed reads of what the run left: its report, its
stages' states and outputs, counts of the home's MLMD executions and artifacts per type, its
served versions, any artifact's properties, a `bigtrain lineage` answer.

    home = PipelineHome(str(tmp_path_factory.mktemp("home")), session_capsys,
                        "--set", f"data.input={corpus_root}", *SMALL_RUN)
    run = home.run("--set", "train.learning_rate=2e-3")      # a PipelineRun
    assert run.exit_code == 0, run.stderr
    assert run.states()["Trainer"] == "complete"

The presets of run sizes (SMALL_RUN, base_args, ONE_DEVICE ...) are in tests/e2e/conftest.py;
docs/operations.md "Writing a pipeline test" has a whole test."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass

from runners.cli import app as cli


@dataclass
class PipelineRun:
    """One `bigtrain run` and what it left in its home (read from MLMD on each call)."""
    home: str
    exit_code: int
    stdout: str
    stderr: str
    run_id: str | None = None
    mysql: dict | None = None  # the server and database when the run used metadata.backend=mysql
    served_after: dict | None = None  # PipelineHome.run: serving_versions() just after the run

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.home, "metadata.sqlite")

    def store(self):
        from benchmarks.support.mlmd import connect
        if self.mysql:
            m = self.mysql
            return connect(mysql_host=m["host"], mysql_port=int(m["port"]), mysql_user=m["user"],
                           mysql_password=m["password"], mysql_database=m["database"])
        return connect(self.metadata_path)

    def report(self):
        """The run's report (pipeline/lineage/report.py RunReport): `.stage(node).outputs`."""
        from pipeline.lineage.report import run_report
        return run_report(self.store(), run_id=self.run_id)

    def states(self) -> dict[str, str]:
        """node -> complete, cached, failed ... for this run's stages."""
        return {stage.node: stage.state for stage in self.report().stages}

    def output(self, node: str, key: str) -> dict:
        """The properties of a stage's output artifact in this run (id and uri included)."""
        return self.report().stage(node).outputs[key]

    def artifact(self, artifact_id: int) -> dict:
        """Any artifact's own properties, by id."""
        from pipeline.lineage.store import properties
        (found,) = self.store().get_artifacts_by_id([int(artifact_id)])
        return properties(found, custom_only=True)

    def execution_counts(self) -> dict[str, int]:
        """The home's MLMD executions per type name (every run of the home)."""
        return _per_type(self.store(), "execution")

    def artifact_counts(self) -> dict[str, int]:
        """The home's MLMD artifacts per type name (every run of the home)."""
        return _per_type(self.store(), "artifact")

    def serving_versions(self) -> dict[str, str]:
        """version -> content digest of everything under <home>/serving/gpt/."""
        from components.push.layout import served_versions
        from components.push.push import model_digest
        base = os.path.join(self.home, "serving", "gpt")
        return {v: model_digest(os.path.join(base, str(v))) for v in served_versions(base)}

    def newest_version_dir(self) -> str | None:
        """The folder of the newest version served from this home now (None: nothing pushed)."""
        versions = self.serving_versions()
        return os.path.join(self.home, "serving", "gpt", str(max(versions))) if versions else None


def _per_type(store, kind: str) -> dict[str, int]:
    get_types, get_all = ((store.get_execution_types, store.get_executions) if kind == "execution"
                          else (store.get_artifact_types, store.get_artifacts))
    names = {t.id: t.name for t in get_types()}
    return dict(Counter(names[item.type_id] for item in get_all()))


def run_cli(capsys, home, *extra, mysql=None) -> PipelineRun:
    """`bigtrain run --home HOME EXTRA...` in this process; its run id is the home's newest
    pipeline_run context (None when no pipeline started: up to date, or refused)."""
    capsys.readouterr()
    code = cli.main(["run", "--home", home, *extra])
    captured = capsys.readouterr()
    run = PipelineRun(home, code, captured.out, captured.err, mysql=mysql)
    if mysql or os.path.exists(run.metadata_path):
        runs = run.store().get_contexts_by_type("pipeline_run")
        run.run_id = max(runs, key=lambda c: (c.create_time_since_epoch, c.id)).name if runs else None
    return run


class PipelineHome:
    """A home of its own and the command every run in it shares; `run(*more)` adds settings.
    Its runs, oldest first, are `runs`: nothing else writes into the home."""

    def __init__(self, path: str, capsys, *base: str):
        self.path, self.capsys, self.base = str(path), capsys, base
        self.runs: list[PipelineRun] = []

    def run(self, *more: str) -> PipelineRun:
        run = run_cli(self.capsys, self.path, *self.base, *more)
        run.served_after = run.serving_versions()   # a snapshot: later runs may push again
        self.runs.append(run)
        return run

    def lineage_json(self, *args):
        return lineage_json(self.capsys, self.path, *args)


def session_capture(request):
    """capsys is function-scoped; a session or module fixture captures through pytest's capture
    manager (its global capture) instead."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    class _Capture:
        def readouterr(self):
            out, err = capman.read_global_capture()
            return type("C", (), {"out": out, "err": err})()
    return _Capture()


def lineage_text(capsys, home, *args) -> str:
    """`bigtrain lineage ARGS --home HOME`'s stdout; asserts exit 0 (stderr in the message).
    capsys: the test's own, or session_capsys from a shared fixture."""
    capsys.readouterr()
    code = cli.main(["lineage", *args, "--home", home])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def lineage_json(capsys, home, *args):
    return json.loads(lineage_text(capsys, home, *args, "--json"))
