"""The sqlite read of an artifact's events (pipeline/lineage/event_table.py) against MLMD's own
API on the same store, the independent reference: every event type and execution state, the
ends and readers Lineage derives from them, and the fall-back to MLMD for any other schema
version or a MySQL store. Mutations it catches (3 of 4 tests fail each): the event type and
state columns swapped in the query, the join on the artifact id, the filter on the execution id."""

import contextlib
import os

import pytest
from ml_metadata.proto import metadata_store_pb2 as pb

from pipeline.lineage import event_table
from pipeline.lineage.store import Lineage
from benchmarks.support import shared_store
from benchmarks.support.mlmd import connect
from tests.support.mlmd import mysql_server

STATES = [pb.Execution.NEW, pb.Execution.RUNNING, pb.Execution.COMPLETE, pb.Execution.FAILED,
          pb.Execution.CACHED, pb.Execution.CANCELED, pb.Execution.UNKNOWN]


@pytest.fixture(scope="module", params=["sqlite", "mysql"])
def mixed_store(request, tmp_path_factory):
    """Two artifacts; one execution per state (the last with none set), each with one event of
    every type on artifact A (ids shuffled against the states) and one OUTPUT on B. On sqlite
    and on the MariaDB `make test` starts. Yields (a function opening a reader, (A, B))."""
    if request.param == "sqlite":
        where = {"sqlite_path": str(tmp_path_factory.mktemp("events") / "metadata.sqlite")}
    else:
        env = mysql_server()
        where = {"mysql_host": env["BIGTRAIN_TEST_MYSQL_HOST"],
                 "mysql_port": int(env["BIGTRAIN_TEST_MYSQL_PORT"]),
                 "mysql_user": env["BIGTRAIN_TEST_MYSQL_USER"],
                 "mysql_password": env["BIGTRAIN_TEST_MYSQL_PASSWORD"],
                 "mysql_database": f"bigtrain_events_{os.getpid()}"}
    store = connect(read_only=False, **where)
    yield (lambda: connect(**where)), _fill(store)
    if request.param == "mysql":
        import pymysql
        with contextlib.closing(pymysql.connect(
                host=where["mysql_host"], port=where["mysql_port"], user=where["mysql_user"],
                password=where["mysql_password"])) as db:
            db.cursor().execute(f"DROP DATABASE IF EXISTS {where['mysql_database']}")


def _fill(store) -> tuple[int, int]:
    type_id = store.put_artifact_type(pb.ArtifactType(name="Examples"))
    a, b = store.put_artifacts([pb.Artifact(type_id=type_id, uri="/a"),
                                pb.Artifact(type_id=type_id, uri="/b")])
    exec_type = store.put_execution_type(pb.ExecutionType(name="Node"))
    executions = [pb.Execution(type_id=exec_type, last_known_state=s) for s in STATES[:-1]]
    executions.append(pb.Execution(type_id=exec_type))
    ids = store.put_executions(executions)
    kinds = [k for k in pb.Event.Type.values() if k != pb.Event.UNKNOWN]
    events = [shared_store.event(kinds[(i + j) % len(kinds)], "k", a, e)
              for i, e in enumerate(ids) for j in range(len(kinds))]
    events += [shared_store.event(pb.Event.OUTPUT, "k", b, e) for e in ids[::2]]
    store.put_events(events)
    return a, b


def _by_api(store, artifact_id):
    events = store.get_events_by_artifact_ids([artifact_id])
    states = {e.id: e.last_known_state for e in store.get_executions_by_id(
        sorted({e.execution_id for e in events}))}
    return sorted((e.execution_id, e.type, states[e.execution_id]) for e in events)


def test_rows_equal_mlmds_events_and_states(mixed_store):
    reader, artifacts = mixed_store
    store = reader()
    for artifact_id in artifacts:
        rows = event_table.artifact_events(store, artifact_id)
        assert rows is not None and sorted(rows) == _by_api(store, artifact_id)
    assert {state for _, _, state in event_table.artifact_events(store, artifacts[0])} == set(STATES)
    assert event_table.artifact_events(store, 999) == ()


def test_lineage_reads_the_same_ends_and_readers_either_way(mixed_store, monkeypatch):
    reader, artifacts = mixed_store
    by_sql = Lineage(reader())
    answers = [(by_sql.emitters(a), by_sql.consumers(a), by_sql.readers(a)) for a in artifacts]
    monkeypatch.setattr(event_table, "artifact_events", lambda store, artifact_id: None)
    by_api = Lineage(reader())
    assert answers == [(by_api.emitters(a), by_api.consumers(a), by_api.readers(a))
                       for a in artifacts]
    assert answers[0][2][1], "one reader of A is CACHED"


def test_shared_store_readers_agree(tmp_path, monkeypatch):
    path = shared_store.build(str(tmp_path), 20)
    ran, cached = Lineage(connect(path)).readers(1)
    assert (len(ran), len(cached)) == (2, 38)       # StatisticsGen and Trainer of each run
    monkeypatch.setattr(event_table, "artifact_events", lambda store, artifact_id: None)
    assert Lineage(connect(path)).readers(1) == (ran, cached)


def test_other_schema_versions_and_mysql_are_read_through_mlmd(mixed_store, monkeypatch):
    """A store of a schema version the query was not written for is read through MLMD (MLMD
    itself refuses to open a newer one, so the known versions are narrowed instead)."""
    reader, (a, _) = mixed_store
    store = reader()
    monkeypatch.setattr(event_table, "SCHEMA_VERSIONS", (9,))
    assert event_table.artifact_events(store, a) is None

    class GrpcStore:
        _config = pb.MetadataStoreClientConfig(host="localhost", port=8080)
    assert event_table.artifact_events(GrpcStore(), a) is None
    assert event_table.artifact_events(object(), a) is None
