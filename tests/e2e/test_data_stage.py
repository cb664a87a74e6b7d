"""End to end: ExampleGen -> StatisticsGen -> CuratedSchemaGen -> ExampleValidator -> gate, asserted
through MLMD. Both runs are real LocalDagRunner runs into temporary homes."""

import glob
import hashlib
import json
import os

import sys

import pytest
from ml_metadata.proto import metadata_store_pb2

from components.storage import listing
from components.corpus import documents
from pipeline.lineage.store import properties
from tests.support.pipeline_run import run_cli

pytestmark = pytest.mark.slow

STAGES = {"TextExampleGen", "StatisticsGen", "CuratedSchemaGen", "ExampleValidator", "AnomaliesGate",
          "Trainer", "latest_blessed_model_resolver", "LanguageModelEvaluator", "Pusher"}


def examples_artifact(store):
    (artifact,) = store.get_artifacts_by_type("Examples")
    return artifact


def test_every_stage_completes(data_run):
    assert data_run.exit_code == 0, data_run.stderr
    store = data_run.store()
    (run_context,) = [c for c in store.get_contexts_by_type("pipeline_run") if c.name == data_run.run_id]
    executions = store.get_executions_by_context(run_context.id)
    assert len(executions) == len(STAGES)
    assert all(e.last_known_state == metadata_store_pb2.Execution.COMPLETE for e in executions)
    assert set(data_run.states()) == STAGES
    assert "run COMPLETE" in data_run.stdout


def test_shards_exist_for_both_splits(data_run):
    artifact = examples_artifact(data_run.store())
    for split, shards in (("train", 4), ("eval", 1)):
        files = sorted(glob.glob(os.path.join(artifact.uri, f"Split-{split}", "*.gz")))
        assert [os.path.basename(f) for f in files] == [
            f"data_tfrecord-{i:05d}-of-{shards:05d}.gz" for i in range(shards)]
        assert all(os.path.getsize(f) > 0 for f in files)


def test_counters_are_mlmd_properties_and_add_up(data_run):
    artifact = examples_artifact(data_run.store())
    props = properties(artifact, custom_only=True)
    on_disk = json.load(open(os.path.join(artifact.uri, "counters.json")))
    for name in ("files_listed", "files_read", "bytes_read", "bytes_packed", "bytes_quarantined",
                 "sequences_train", "sequences_eval", "tokens_real", "tokens_padding"):
        assert props[name] == on_disk[name], name
    assert props["bytes_read"] == (props["bytes_packed"] + props["bytes_quarantined"]
                                   + props["bytes_separators"] + props["bytes_duplicate"])
    # data.dedup=exact: a file whose text equals an earlier one's (CRLF -> LF, surrounding
    # whitespace stripped; reference: hashlib over the raw files here) is packed once.
    texts = [open(path, "rb").read() for relative, path in listing.list_input_files(data_run.corpus)[1]
             if relative not in data_run.quarantined]
    keys = [hashlib.sha256(t.replace(b"\r\n", b"\n").strip()).digest() for t in texts]
    assert props["documents_skipped_duplicate"] == len(keys) - len(set(keys))
    assert (props["bytes_duplicate"] > 0) == (len(keys) > len(set(keys)))
    files_skipped = sum(props.get(f"files_skipped_{r}", 0) for r in documents.FILE_REASONS)
    assert props["files_listed"] == props["files_read"] + files_skipped == len(
        listing.list_input_files(data_run.corpus)[1])
    documents_skipped = sum(props.get(f"documents_skipped_{r}", 0) for r in documents.DOCUMENT_REASONS)
    assert files_skipped + documents_skipped == len(data_run.quarantined)
    assert props["real_token_fraction"] >= 0.95
    assert props["input_fingerprint"] == on_disk["input_fingerprint"] and len(props["input_fingerprint"]) == 64
    assert artifact.custom_properties["file_format"].string_value == "tfrecords_gzip"
    manifest = [json.loads(l) for l in open(props["quarantine_manifest"])]
    assert {m["path"]: m["reason"] for m in manifest} == data_run.quarantined


def test_report_prints_counters(data_run):
    for line in ("TextExampleGen", "documents_packed", "bytes_quarantined", "sequences_train",
                 "quarantine manifest"):
        assert line in data_run.stdout
    assert os.path.exists(glob.glob(os.path.join(data_run.home, "runs", "*", "config.yaml"))[0])


def write_bad_shards(root, seq_len):
    """Shards that violate the schema: an id out of range (train), too-short sequences (eval)."""
    import tensorflow as tf
    from tensorflow.core.example import example_pb2

    def example(ids):
        e = example_pb2.Example()
        e.features.feature["input_ids"].int64_list.value.extend(ids)
        return e.SerializeToString()

    for split in ("train", "eval"):
        os.makedirs(os.path.join(root, split))
    with tf.io.TFRecordWriter(os.path.join(root, "train", "part-0.gz"), options="GZIP") as w:
        for i in range(40):
            w.write(example([i % 256] * seq_len + [300 if i == 3 else 1]))
    with tf.io.TFRecordWriter(os.path.join(root, "eval", "part-0.gz"), options="GZIP") as w:
        for i in range(20):
            w.write(example([7] * (seq_len // 2 if i < 5 else seq_len + 1)))


def test_gate_stops_the_run_and_names_each_anomaly(tmp_path, session_capsys):
    write_bad_shards(str(tmp_path / "shards"), seq_len=128)
    run = run_cli(session_capsys, str(tmp_path / "home"), "--set", "data.format=tfrecord",
                  "--set", f"data.input={tmp_path / 'shards'}")
    assert run.exit_code == 3
    assert "validation gate: 2 data anomalies found, training stopped" in run.stderr
    assert "[train] feature 'input_ids': INT_TYPE_BIG_INT: Unexpectedly large value: 300" in run.stderr
    assert "[eval] feature 'input_ids': FEATURE_TYPE_LOW_NUMBER_VALUES" in run.stderr
    states = {}
    store = run.store()
    for ctx in store.get_contexts_by_type("node"):
        for e in store.get_executions_by_context(ctx.id):
            states[ctx.name.split(".", 1)[1]] = e.last_known_state
    assert states["AnomaliesGate"] == metadata_store_pb2.Execution.FAILED
    assert states["ExampleValidator"] == metadata_store_pb2.Execution.COMPLETE
    assert "Trainer" not in states  # stopped before any training
    assert not store.get_artifacts_by_type("Model")


def test_good_shards_pass_the_gate(data_run, tmp_path, session_capsys):
    """The same gate lets the data stage's own shards through when imported (no false alarms).
    The run stops after the gate (`--until AnomaliesGate`): training on the shards proves nothing
    more about the gate (it was a whole default-size run, the suite's slowest call after kill -9)."""
    import shutil
    artifact = examples_artifact(data_run.store())
    for split in ("train", "eval"):
        shutil.copytree(os.path.join(artifact.uri, f"Split-{split}"), tmp_path / "shards" / split)
    run = run_cli(session_capsys, str(tmp_path / "home"), "--set", "data.format=tfrecord",
                  "--set", f"data.input={tmp_path / 'shards'}", "--set", "data.seq_len=64",
                  "--until", "AnomaliesGate")
    assert run.exit_code == 0, run.stderr
    states = stage_states(run)
    assert states["ExampleValidator"] == states["AnomaliesGate"] == "complete", states
    assert "Trainer" not in states, states


# ----------------------------------------------------------------------------------------------
# Other corpus shapes, data stages only (`--until`): one big text file, JSON Lines, Parquet.


def stage_states(run):
    return {node: state for node, state in run.states().items()}


def split_sizes(run):
    props = properties(examples_artifact(run.store()), custom_only=True)
    return props, (props["sequences_train"], props["sequences_eval"])


def test_single_text_file_split_by_separator_until_example_gen(tmp_path, session_capsys, corpus):
    """One text file (the corpus concatenated), documents split on blank lines, read in byte
    ranges: both splits get sequences; --until stops after the data stage."""
    root, quarantined = corpus
    (tmp_path / "in").mkdir()
    with open(tmp_path / "in" / "dump.txt", "wb") as out:
        for relative, path in listing.list_input_files(root, exclude=["*.bin", "*latin1*"])[1]:
            if relative not in quarantined:
                out.write(open(path, "rb").read() + b"\n\n")
    run = run_cli(session_capsys, str(tmp_path / "home"), "--until", "TextExampleGen",
                  "--set", f"data.input={tmp_path / 'in'}", "--set", "data.document=separator",
                  "--set", "data.range_bytes=100000", "--set", "data.seq_len=64")
    assert run.exit_code == 0, run.stderr
    assert set(stage_states(run)) == {"TextExampleGen"}
    assert "stopped after TextExampleGen" in run.stdout
    (context,) = [c for c in run.store().get_contexts_by_type("pipeline_run") if c.name == run.run_id]
    assert context.custom_properties["until"].string_value == "TextExampleGen"
    props, (train, evaluation) = split_sizes(run)
    assert props["files_listed"] == props["files_read"] == 1 and train > 0 and evaluation > 0
    assert props["document"] == "separator" and props["documents_packed"] > 100


def test_jsonl_corpus_through_the_validation_gate(tmp_path, session_capsys, corpus):
    root, quarantined = corpus
    (tmp_path / "in").mkdir()
    with open(tmp_path / "in" / "part-0.jsonl", "w", encoding="utf-8") as out:
        for relative, path in listing.list_input_files(os.path.join(root, "json"))[1]:
            for i, chunk in enumerate(open(path, encoding="utf-8").read().split("\n\n")):
                out.write(json.dumps({"text": chunk, "source": relative, "i": i}) + "\n")
        out.write("{broken\n")
    run = run_cli(session_capsys, str(tmp_path / "home"), "--until", "AnomaliesGate",
                  "--set", "data.format=jsonl", "--set", f"data.input={tmp_path / 'in'}",
                  "--set", "data.seq_len=64")
    assert run.exit_code == 0, run.stderr
    assert set(stage_states(run)) == {"TextExampleGen", "StatisticsGen", "CuratedSchemaGen",
                                      "ExampleValidator", "AnomaliesGate"}
    props, (train, evaluation) = split_sizes(run)
    assert train > 0 and evaluation > 0 and props["documents_skipped_invalid_json"] == 1


def test_parquet_corpus_until_example_gen(tmp_path, session_capsys, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq
    (tmp_path / "in").mkdir()
    texts = [f"paragraph {i}: " + "lorem ipsum dolor " * (i % 13 + 1) for i in range(400)]
    pq.write_table(pa.table({"content": texts}), tmp_path / "in" / "data.parquet", row_group_size=64)
    args = ["--until", "TextExampleGen", "--set", "data.format=parquet",
            "--set", "data.text_field=content", "--set", f"data.input={tmp_path / 'in'}",
            "--set", "data.seq_len=64", "-v"]
    # As typed: with `-v` in sys.argv, absl's flag parsing inside the Beam stage read bigtrain's
    # own `-v` as its verbosity flag and failed (invalid literal for int()).
    monkeypatch.setattr(sys, "argv", ["bigtrain", "run", "--home", str(tmp_path / "home"), *args])
    run = run_cli(session_capsys, str(tmp_path / "home"), *args)
    assert run.exit_code == 0, run.stderr
    props, (train, evaluation) = split_sizes(run)
    assert props["documents_packed"] == 400 and train > 0 and evaluation > 0


def test_until_names_an_unknown_stage(tmp_path, session_capsys, corpus):
    run = run_cli(session_capsys, str(tmp_path / "home"), "--until", "Trainr",
                  "--set", f"data.input={corpus[0]}")
    assert run.exit_code == 2 and "no such stage" in run.stderr and "Trainer" in run.stderr


def test_lineage_summary_and_trace_down_a_file(data_run):
    """`lineage summary` of the first run's pushed version and `trace --down` of one of its input
    files, on the real run's MLMD; the reference: the Examples' own counters and the listing."""
    from pipeline.lineage import content
    from pipeline.lineage.explore import pushed_model
    from pipeline.lineage.store import Lineage
    store = data_run.store()
    lin = Lineage(store)
    version = pushed_model(lin, data_run.run_id)["version"]
    assert version is not None
    result = content.summary(lin, str(version))
    props = properties(examples_artifact(store))
    files = listing.list_input_files(data_run.corpus)[1]
    (source,) = result["sources"]
    assert (source["name"], source["files"], result["run_id"]) == ("default", len(files), data_run.run_id)
    assert source["documents"]["train"] + source["documents"]["eval"] == props["documents_packed"]
    assert source["epochs"] == 1.0
    steps = {s["step"]: s["count"] for s in result["steps"]}
    assert steps["documents_skipped_duplicate"] == props["documents_skipped_duplicate"]
    assert result["tokenizer"]["kind"] == "bytes"
    kept = next(path for relative, path in files if relative not in data_run.quarantined)
    versions = [p["pushed_version"] for p in content.trace_down(lin, kept)["pushed_versions"]]
    assert str(version) in versions
