"""Issue 41: a Trainer killed -9 left empty Trainer/model/N and model_run/N folders (TFX makes
the output folders before the executor runs). The next run records the dead process's
executions abandoned and removes their output folders that hold no file; a folder with a file,
or any artifact that is not abandoned, stays."""

from ml_metadata.proto import metadata_store_pb2 as pb

from benchmarks.support.mlmd import connect
from runners.local.abandoned import remove_empty_outputs


def test_only_the_abandoned_outputs_that_hold_no_file_are_removed(tmp_path):
    store = connect(str(tmp_path / "metadata.sqlite"), read_only=False)
    model_type = store.put_artifact_type(pb.ArtifactType(name="Model"))
    trainer_type = store.put_execution_type(pb.ExecutionType(name="Trainer"))
    folders = {name: tmp_path / "Trainer" / name / "7" for name in
               ("model", "model_run", "with_a_file", "live_empty")}
    for folder in folders.values():
        (folder / "inner").mkdir(parents=True)            # empty sub-folders: still no file
    (folders["with_a_file"] / "inner" / "partial.index").write_bytes(b"x")
    states = {"model": pb.Artifact.ABANDONED, "model_run": pb.Artifact.ABANDONED,
              "with_a_file": pb.Artifact.ABANDONED, "live_empty": pb.Artifact.LIVE}
    ids = store.put_artifacts([pb.Artifact(type_id=model_type, uri=str(folders[n]), state=s)
                              for n, s in states.items()])
    [execution_id] = store.put_executions([pb.Execution(
        type_id=trainer_type, last_known_state=pb.Execution.CANCELED)])
    store.put_events([pb.Event(artifact_id=i, execution_id=execution_id, type=pb.Event.OUTPUT)
                      for i in ids])
    [execution] = store.get_executions_by_id([execution_id])
    assert remove_empty_outputs(store, [execution]) == 2
    assert {n: f.exists() for n, f in folders.items()} == {
        "model": False, "model_run": False, "with_a_file": True, "live_empty": True}
