"""record.mark_abandoned at every run start: it finds each execution a dead process left RUNNING
(or NEW), whatever its age in an old store, and reads only what is newer than its last sweep,
so its store calls do not grow with the history (the 88 s of 929 listing pages at 10,000 runs)."""

import pytest
from ml_metadata.proto import metadata_store_pb2 as pb

from pipeline.lineage import record
from tests.support.mlmd import writable_store

Execution = pb.Execution
NODES = 10


def _store(tmp_path):
    store = writable_store(tmp_path / "metadata.sqlite")
    pipeline_type = store.put_context_type(pb.ContextType(name="pipeline"))
    store.put_context_type(pb.ContextType(name="pipeline_run"))
    store.put_contexts([pb.Context(type_id=pipeline_type, name="bigtrain")])
    return store


def _add_runs(store, runs: int, state=Execution.COMPLETE, last_state=None) -> list[int]:
    """`runs` runs of NODES executions each, in the pipeline and a run context; the very last
    execution gets last_state when given. Returns the new execution ids."""
    exec_type = store.put_execution_type(pb.ExecutionType(name="bigtrain.Stage"))
    run_type = store.get_context_type("pipeline_run").id
    pipeline = store.get_context_by_type_and_name("pipeline", "bigtrain")
    first = len(store.get_contexts_by_type("pipeline_run"))
    run_ids = store.put_contexts([pb.Context(type_id=run_type, name=f"run-{first + i}")
                                  for i in range(runs)])
    states = [state] * (runs * NODES)
    if last_state is not None:
        states[-1] = last_state
    ids = store.put_executions([Execution(type_id=exec_type, last_known_state=s) for s in states])
    store.put_attributions_and_associations([], [
        pb.Association(context_id=c, execution_id=e) for i, e in enumerate(ids)
        for c in (pipeline.id, run_ids[i // NODES])])
    return list(ids)


def _running(store) -> list[int]:
    """The reference: every RUNNING or NEW execution, from a whole-store listing."""
    return sorted(e.id for e in store.get_executions()
                  if e.last_known_state in (Execution.RUNNING, Execution.NEW))


def _counting(store) -> list[str]:
    """Record the name of every call the store makes to MLMD (one per listing page)."""
    calls, call = [], store._call
    store._call = lambda name, *args, **kw: calls.append(name) or call(name, *args, **kw)
    return calls


def test_an_old_store_is_swept_whole_once(tmp_path):
    """No mark yet (older bigtrain): an execution left RUNNING in the oldest run is found."""
    store = _store(tmp_path)
    old = _add_runs(store, 1, last_state=Execution.RUNNING)
    _add_runs(store, 30)
    assert _running(store) == [old[-1]]
    left = record.mark_abandoned(store, "bigtrain", "note")
    assert [e.id for e in left] == [old[-1]] and _running(store) == []
    abandoned = store.get_executions_by_id([old[-1]])[0]
    assert abandoned.custom_properties[record.ABANDONED_BY].string_value == "note"
    assert record.mark_abandoned(store, "bigtrain", "again") == []


@pytest.mark.parametrize("state", [Execution.RUNNING, Execution.NEW])
def test_executions_left_since_the_last_sweep_are_found(tmp_path, state):
    store = _store(tmp_path)
    _add_runs(store, 3)
    record.mark_abandoned(store, "bigtrain", "first")
    newest = _add_runs(store, 2, last_state=state)
    newest += _add_runs(store, 1, state=state)  # a run killed before any stage finished
    expected = _running(store)
    assert len(expected) == NODES + 1
    assert sorted(e.id for e in record.mark_abandoned(store, "bigtrain", "n")) == expected
    assert _running(store) == []


def _calls_at(tmp_path, history_runs: int) -> list[str]:
    """Store calls of the run start after `history_runs` swept runs and one that died."""
    tmp_path.mkdir()
    store = _store(tmp_path)
    _add_runs(store, history_runs)
    record.mark_abandoned(store, "bigtrain", "earlier start")
    died = _add_runs(store, 1, last_state=Execution.RUNNING)
    calls = _counting(store)
    left = record.mark_abandoned(store, "bigtrain", "now")
    assert [e.id for e in left] == [died[-1]]
    return calls


def test_store_calls_do_not_grow_with_the_history(tmp_path):
    """Catches a sweep that lists every execution of the pipeline (one page per 100)."""
    small, large = _calls_at(tmp_path / "small", 2), _calls_at(tmp_path / "large", 300)
    assert small == large and small.count("GetExecutions") == 1
    assert "GetExecutionsByContext" not in small  # a context's listing sorts all its executions


def test_another_pipelines_running_execution_is_left_alone(tmp_path):
    """A shared store: an execution RUNNING in another pipeline (another home's live run) is
    not this run start's to record, though it is newer than the mark."""
    store = _store(tmp_path)
    _add_runs(store, 2)
    record.mark_abandoned(store, "bigtrain", "first")
    other_type = store.get_context_type("pipeline").id
    [other] = store.put_contexts([pb.Context(type_id=other_type, name="other")])
    exec_type = store.put_execution_type(pb.ExecutionType(name="other.Stage"))
    [live] = store.put_executions([Execution(type_id=exec_type,
                                             last_known_state=Execution.RUNNING)])
    store.put_attributions_and_associations([], [pb.Association(context_id=other,
                                                                execution_id=live)])
    died = _add_runs(store, 1, last_state=Execution.RUNNING)
    assert [e.id for e in record.mark_abandoned(store, "bigtrain", "n")] == [died[-1]]
    assert _running(store) == [live]
