"""The run report names where each Beam stage ran and why (issue 59 item 2): a pipeline built for
a Dask run gives each Beam stage its runner, the Dask scheduler or the reason it stays on the
DirectRunner (pipeline.beam_stage_lines, which `bigtrain run` records on the run's context as
bigtrain_beam_placement), and the report read back from MLMD prints those lines, a cached stage
marked as not run. A DirectRunner run records and prints nothing of the kind."""

from __future__ import annotations

import json

import pytest
from ml_metadata.proto import metadata_store_pb2 as pb

from components.config import build_config
from pipeline.lineage import record, report
from benchmarks.support.lineage_store import Builder, _context
from tests.support.mlmd import writable_store

DASK = ["--runner", "DaskRunner", "--dask_client_address=tcp://10.0.0.5:8786"]


def built(tmp_path, beam_args, *overrides):
    from pipeline.pipeline import create_pipeline
    return create_pipeline(build_config("tiny", overrides=list(overrides)),
                           pipeline_root=str(tmp_path / "root"), serving_dir=str(tmp_path / "s"),
                           beam_pipeline_args=beam_args, input_fingerprint="f" * 64)


def test_each_beam_stage_of_a_dask_run_is_named_with_its_runner_and_why(tmp_path):
    from pipeline.pipeline import beam_stage_lines
    pipeline = built(tmp_path, DASK, "data.tokenizer=sentencepiece", "data.vocab_size=2000")
    direct = build_config("tiny").runtime.beam_direct_stages
    assert beam_stage_lines(pipeline, direct) == [   # written out by hand
        "TokenizerGen: DaskRunner (runtime.beam_args: tcp://10.0.0.5:8786)",
        "TextExampleGen: DaskRunner (runtime.beam_args: tcp://10.0.0.5:8786)",
        "StatisticsGen: DirectRunner (TFDV's statistics fail on Beam's DaskRunner ('NoneType' "
        "object has no attribute '__dask_keys__'))"]
    assert beam_stage_lines(built(tmp_path, []), direct) == []


@pytest.fixture
def store(tmp_path):
    return writable_store(tmp_path / "metadata.sqlite")


def recorded_run(store, tmp_path, run_id: str, lines: list[str] | None):
    """A run of three stages (TextExampleGen cached) with the placement `bigtrain run` records."""
    b = Builder(store, str(tmp_path))
    run = _context(store, b.types, "pipeline_run", run_id)
    b.execution(run, "TextExampleGen", pb.Execution.CACHED, {}, {})
    b.execution(run, "StatisticsGen", pb.Execution.COMPLETE, {}, {})
    b.execution(run, "SchemaGen", pb.Execution.COMPLETE, {}, {})
    if lines is not None:
        run.custom_properties[record.BEAM_PLACEMENT].string_value = json.dumps(lines)
        store.put_contexts([run])


def test_the_report_prints_the_recorded_placement_and_marks_a_cached_stage(store, tmp_path):
    lines = ["TextExampleGen: DaskRunner (runtime.beam_args: tcp://10.0.0.5:8786)",
             "StatisticsGen: DirectRunner (TFDV's statistics fail on Beam's DaskRunner)"]
    recorded_run(store, tmp_path, "run-1", lines)
    recorded_run(store, tmp_path, "run-2", None)
    text = report.format_report(report.run_report(store, "run-1")).splitlines()
    at = text.index("where the Beam stages ran (runtime.beam_args, runtime.beam_direct_stages):")
    assert text[at + 1:at + 3] == [
        "  TextExampleGen: DaskRunner (runtime.beam_args: tcp://10.0.0.5:8786) "
        "[cached: did not run]",
        "  StatisticsGen: DirectRunner (TFDV's statistics fail on Beam's DaskRunner)"]
    assert "where the Beam stages ran" not in report.format_report(
        report.run_report(store, "run-2"))
