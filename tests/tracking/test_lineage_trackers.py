"""The tracker run ids recorded on a run's MLMD context, as `bigtrain lineage runs` and `trace`
show them: the synthetic store's run-a is tracked (benchmarks/support/lineage_store.py), run-b
and run-c are not."""

from __future__ import annotations

import pytest

from benchmarks.support import lineage_store
from benchmarks.support.mlmd import connect
from pipeline.lineage import queries, render
from pipeline.lineage.store import Lineage


@pytest.fixture(scope="module")
def lin(tmp_path_factory):
    home = tmp_path_factory.mktemp("tracked_home")
    lineage_store.build(str(home))
    return Lineage(connect(str(home / "metadata.sqlite")))


def test_lineage_runs_has_a_trackers_column_naming_each_tracker_run(lin):
    text = render.runs_text(queries.list_runs(lin))
    rows = {line.split()[0]: line for line in text.splitlines()[2:]}
    assert "trackers" in text.splitlines()[0]
    assert rows["run-a"].endswith("mlflow:0a1b2c wandb:run-a")
    assert rows["run-c"].endswith(" -")


def test_trace_names_the_tracker_runs_of_the_run_that_made_the_target(lin):
    model = next(a for a in lin.store.get_artifacts() if lin.artifact_type(a) == "Model"
                 and "run-a" in a.uri)
    text = render.trace_text(queries.trace(lin, str(model.id)))
    assert text.splitlines()[1] == "made in run run-a, tracker runs: mlflow:0a1b2c wandb:run-a"
    untracked = next(a for a in lin.store.get_artifacts() if lin.artifact_type(a) == "Model"
                     and "/run-b" in a.uri)
    assert "tracker runs" not in render.trace_text(queries.trace(lin, str(untracked.id)))
