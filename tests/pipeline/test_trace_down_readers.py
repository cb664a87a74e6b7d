"""`lineage trace --down` walks every reader of an artifact that ran, not only the readers it shows.

The display lists the first and last few readers (queries.SHOWN_AT_EACH_END at each end, or one
page); the walk below an Examples read by 8 Trainers must still reach all 8 Models. The bug this
catches: the walk followed the shown readers only, so `models` held 6 of 8 (the e2e chain's
home lost the model of its third run that way)."""

from ml_metadata.proto import metadata_store_pb2 as pb

from pipeline.lineage import queries
from pipeline.lineage.store import Lineage
from benchmarks.support.shared_store import event
from tests.support.mlmd import memory_store

TRAINERS = 2 * queries.SHOWN_AT_EACH_END + 2    # two more readers than are shown


def examples_read_by_trainers() -> tuple[Lineage, int, list[int]]:
    store = memory_store()
    examples_type = store.put_artifact_type(pb.ArtifactType(name="Examples"))
    model_type = store.put_artifact_type(pb.ArtifactType(name="Model"))
    trainer_type = store.put_execution_type(pb.ExecutionType(name="bigtrain.Trainer"))
    [examples] = store.put_artifacts([pb.Artifact(type_id=examples_type, uri="/examples")])
    models = store.put_artifacts([pb.Artifact(type_id=model_type, uri=f"/model/{i}")
                                  for i in range(TRAINERS)])
    trainers = store.put_executions([pb.Execution(type_id=trainer_type,
                                                  last_known_state=pb.Execution.COMPLETE)
                                     for _ in range(TRAINERS)])
    store.put_events([e for trainer, model in zip(trainers, models) for e in (
        event(pb.Event.INPUT, "examples", examples, trainer),
        event(pb.Event.OUTPUT, "model", model, trainer))])
    node_type = store.put_context_type(pb.ContextType(name="node"))
    run_type = store.put_context_type(pb.ContextType(name="pipeline_run"))
    [node] = store.put_contexts([pb.Context(type_id=node_type, name="bigtrain.Trainer")])
    runs = store.put_contexts([pb.Context(type_id=run_type, name=f"run-{i}") for i in range(TRAINERS)])
    store.put_attributions_and_associations([], [
        pb.Association(context_id=c, execution_id=t)
        for t, run in zip(trainers, runs) for c in (node, run)])
    return Lineage(store), examples, models


def test_every_model_below_is_found_though_only_some_readers_are_shown():
    lin, examples, models = examples_read_by_trainers()
    result = queries.trace(lin, str(examples), down=True)
    (first, *_) = result["steps"]
    assert len(first["used_by"]) == 2 * queries.SHOWN_AT_EACH_END
    assert first["used_by_not_shown"] == 2
    assert sorted(result["models"]) == sorted(models)


def test_a_page_past_the_readers_still_walks_them_all():
    lin, examples, models = examples_read_by_trainers()
    result = queries.trace(lin, str(examples), down=True, page=2)
    assert result["steps"][0]["used_by"] == []          # page 2 of 1: nothing shown
    assert sorted(result["models"]) == sorted(models)
