"""The up-to-date check with remote artifacts (issue 18 item 9): outputs on s3:// are checked
through fs (one existence check each), like local ones, against the S3 server of
`make objectstore`. Catches: the old `"://" in uri` skip, which called a run whose artifacts were
deleted from the bucket "up to date" (the pipeline would not start and serving stays stale)."""

from ml_metadata.proto import metadata_store_pb2

from components.storage import fs
from runners.local.uptodate import outputs_missing
from tests.support.objectstore import use_objectstore


class _Lineage:
    """The three reads outputs_missing makes of pipeline.lineage.store.Lineage, over MLMD
    Artifact protos (no store needed)."""

    def __init__(self, artifacts):
        self.artifacts = {i: a for i, a in enumerate(artifacts)}

    def executions_of(self, run):
        return [metadata_store_pb2.Execution(id=1)]

    def outputs(self, execution_id):
        return {"out": list(self.artifacts)}

    def artifact(self, artifact_id):
        return self.artifacts[artifact_id]


def _artifact(uri, pushed_destination=None):
    artifact = metadata_store_pb2.Artifact(uri=uri)
    if pushed_destination:
        artifact.custom_properties["pushed"].int_value = 1
        artifact.custom_properties["pushed_destination"].string_value = pushed_destination
    return artifact


def test_remote_outputs_are_checked_through_fs(tmp_path, monkeypatch):
    prefix = use_objectstore(monkeypatch)
    (tmp_path / "here").mkdir()
    try:
        fs.write_text(f"{prefix}/Examples/1/counters.json", "{}")
        fs.write_text(f"{prefix}/serving/gpt/1/saved_model.pb", "x")
        lin = _Lineage([
            _artifact(str(tmp_path / "here")), _artifact(str(tmp_path / "gone")),
            _artifact(f"{prefix}/Examples/1"), _artifact(f"{prefix}/Examples/2"),
            _artifact(f"{prefix}/Pushed/1", pushed_destination=f"{prefix}/serving/gpt/1"),
            _artifact(f"{prefix}/Pushed/2", pushed_destination=f"{prefix}/serving/gpt/2")])
        # The Pushers' own folders are empty (so absent from the bucket): not reported.
        assert outputs_missing(lin, run=None) == [
            str(tmp_path / "gone"), f"{prefix}/Examples/2", f"{prefix}/serving/gpt/2"]
    finally:
        fs.rmtree(prefix)
