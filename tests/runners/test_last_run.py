"""uptodate.last_run_of reads runs newest first in growing pages: it finds the pipeline's newest
run behind many newer runs of another pipeline (a shared store), as a whole listing does."""

from ml_metadata.proto import metadata_store_pb2 as pb

from pipeline.lineage.store import Lineage
from runners.local import uptodate
from benchmarks.support import lineage_store
from benchmarks.support.mlmd import connect


def _other_pipeline_runs(store, count: int) -> None:
    pipeline_type = store.get_context_type("pipeline").id
    run_type = store.get_context_type("pipeline_run").id
    [other] = store.put_contexts([pb.Context(type_id=pipeline_type, name="other")])
    exec_type = store.put_execution_type(pb.ExecutionType(name="other.Stage"))
    runs = store.put_contexts([pb.Context(type_id=run_type, name=f"other-{i}") for i in range(count)])
    executions = store.put_executions([pb.Execution(type_id=exec_type) for _ in runs])
    store.put_attributions_and_associations([], [
        pb.Association(context_id=c, execution_id=e)
        for run, e in zip(runs, executions) for c in (other, run)])


def _reference(lin, pipeline_name):
    """The whole listing: every run newest first, the first with an execution of the pipeline."""
    for run in lin.runs():
        executions = lin.executions_of(run)
        if executions and any(c.name == pipeline_name for c in
                              lin.store.get_contexts_by_execution(executions[0].id)):
            return run
    return None


def test_newest_run_found_behind_another_pipelines_runs(tmp_path):
    path = lineage_store.build(str(tmp_path))
    _other_pipeline_runs(connect(path, read_only=False), 50)
    lin = Lineage(connect(path))
    assert uptodate.last_run_of(lin, "bigtrain").name == _reference(lin, "bigtrain").name == "run-c"
    assert uptodate.last_run_of(lin, "other").name == _reference(lin, "other").name
    assert uptodate.last_run_of(lin, "nothing") is None
