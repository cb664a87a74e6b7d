"""The lineage package's history-independent reads give the answers of the plain reads they
replace (the reference: a whole-store listing, read here on purpose)."""

import os

from pipeline.lineage import queries
from pipeline.lineage.store import Lineage
from benchmarks.support.mlmd import connect


def test_runs_pages_are_slices_of_the_whole_history(open_lineage):
    """Catches a page that skips or repeats a run at its edges, or a wrong order."""
    lin = open_lineage()
    everything = sorted(lin.store.get_contexts_by_type("pipeline_run"),
                        key=lambda c: (c.create_time_since_epoch, c.id), reverse=True)
    names = [c.name for c in everything]
    for offset in range(4):
        for limit in (1, 2, 5):
            assert [c.name for c in lin.runs_page(offset, limit)] == names[offset:offset + limit]
    assert lin.run("latest").name == names[0] and lin.run("latest~2").name == names[2]
    assert [r["run_id"] for r in queries.list_runs(lin, limit=None)] == names


def test_node_names_by_execution_type_equal_those_by_context(open_lineage):
    """Catches a type -> node map that names an execution after another node."""
    lin = open_lineage()
    for ctx in lin.store.get_contexts_by_type("node"):
        for execution in lin.store.get_executions_by_context(ctx.id):
            assert lin.node_of[execution.id] == ctx.name.split(".", 1)[1]


def test_run_state_and_state_filter_agree_with_run_summary(open_lineage):
    lin = open_lineage()
    for run in lin.runs():
        assert queries.run_state(lin, run) == queries.run_summary(lin, run)["state"]
    page = queries.runs_page(lin, limit=5, state="failed")
    assert [r["run_id"] for r in page["runs"]] == ["run-c"] and page["next_offset"] is None


def test_previous_execution_is_the_newest_earlier_one_of_the_node(open_lineage):
    lin = open_lineage()
    trainer = lin.store.get_context_by_type_and_name("node", "bigtrain.Trainer")
    executions = sorted(lin.store.get_executions_by_context(trainer.id), key=lambda e: e.id)
    assert lin.previous_execution(executions[0]) is None
    for before, after in zip(executions, executions[1:]):
        assert lin.previous_execution(after).id == before.id


def test_pushed_version_dir_found_by_its_push_record_or_by_a_scan(ui_home, monkeypatch):
    """The push record's way and the scan (no record) find the same PushedModel, for each
    version. Catches a record lookup that returns another run's push of the same model."""
    lin = Lineage(connect(str(ui_home / "metadata.sqlite")))
    for version in ("1", "2"):
        version_dir = str(ui_home / "serving" / "gpt" / version)
        assert os.path.exists(os.path.join(version_dir, "assets.extra", "bigtrain_push.json"))
        by_record = lin._pushed_by_record(version_dir)
        with monkeypatch.context() as patch:
            patch.setattr(Lineage, "_pushed_by_record", lambda self, path: None)
            by_scan = Lineage(connect(str(ui_home / "metadata.sqlite"))).find_artifact(version_dir)
        assert by_record is not None and by_record.id == by_scan.id
        assert by_record.custom_properties["pushed_version"].string_value == version
