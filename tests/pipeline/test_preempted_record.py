"""A run whose Trainer stopped with TrainingPreempted: record_run marks the FAILED execution
preempted (the cause found through the wrappers TFX and Beam put around it), and the lineage
package reads it as `preempted` (stage, run, `why`), not failed or abandoned; another error
stays failed. The end-to-end version with a real SIGTERM: tests/e2e/test_preempted_run.py."""

from __future__ import annotations

import pytest
from ml_metadata.proto import metadata_store_pb2 as pb

from components.common.errors import TrainingPreempted
from pipeline.lineage import queries, record, render
from pipeline.lineage.store import Lineage
from benchmarks.support.lineage_store import Builder, _context
from tests.support.mlmd import writable_store

MESSAGE = "training preempted at step 21 of 400: checkpoint /c/ckpt-21 with its input state"


def wrapped(error: BaseException) -> BaseException:
    """As the orchestrator re-raises it: inside another exception."""
    try:
        try:
            raise error
        except BaseException as inner:
            raise RuntimeError("Execution 7 failed") from inner
    except RuntimeError as outer:
        return outer


@pytest.fixture
def store(tmp_path):
    return writable_store(tmp_path / "metadata.sqlite")


def failed_run(store, tmp_path, run_id: str):
    b = Builder(store, str(tmp_path))
    run = _context(store, b.types, "pipeline_run", run_id)
    b.execution(run, "ExampleValidator", pb.Execution.COMPLETE, {}, {})
    b.execution(run, "Trainer", pb.Execution.FAILED, {}, {})
    return run


@pytest.mark.parametrize("error, state", [(TrainingPreempted(MESSAGE), "preempted"),
                                          (ValueError("loss is nan"), "failed")])
def test_a_preempted_trainer_reads_preempted_and_another_error_failed(store, tmp_path, error,
                                                                      state):
    failed_run(store, tmp_path, "run-1")
    record.record_run(store, "run-1", "/runs/1", "/runs/1/run.log", "digest", wrapped(error))
    lin = Lineage(store)
    run = lin.run("run-1")
    summary = queries.run_summary(lin, run)
    assert summary["state"] == state and summary["stages"]["Trainer"] == state
    assert summary["stages"]["ExampleValidator"] == "complete"
    why = queries.why(lin, "run-1")
    assert [(f["node"], f["state"]) for f in why["failed"]] == [("Trainer", state)]
    if state == "preempted":
        assert why["failed"][0]["error"] == MESSAGE
        assert why["failed"][0]["error_type"] == "TrainingPreempted"
        assert render.why_text(why).startswith("run run-1 was preempted (the next run resumes it)")
