"""The events of one artifact read straight from the store's Event table: the one read in
lineage whose size grows with the history. An artifact shared by cached runs has an event per
run that reused it (30,000 at 10,000 runs); MLMD's GetEventsByArtifactIDs builds each with its
path, 0.27 s per artifact here, and an artifact page reaches five such artifacts. One indexed
query with the reading executions' states takes 0.05 s (docs/benchmarks.md, "Lineage at 10,000 runs
sharing artifacts").

Why by hand: MLMD has no paged or aggregated event read, and its filter queries (which could do
this) are being removed upstream (google/ml-metadata#226). The query uses only the Event and
Execution columns of MLMD's schema version 10 (the one MLMD 1.16 writes), checked before each
read, on sqlite and MySQL alike; a store of any other version is read through MLMD (store.py)."""

from __future__ import annotations

import contextlib

from ml_metadata.proto import metadata_store_pb2

from components.common.errors import MetadataStoreError
from pipeline.lineage.connection import (MLMD_MARKER_TABLE, describe, open_mysql,
                                         open_sqlite_read_only)

SCHEMA_VERSIONS = (10,)   # the Event and Execution columns below are those of these versions
_VERSION = f"SELECT schema_version FROM {MLMD_MARKER_TABLE}"
_EVENTS = ("SELECT e.execution_id, e.type, COALESCE(x.last_known_state, 0) FROM Event e "
           "JOIN Execution x ON x.id = e.execution_id WHERE e.artifact_id = {} ORDER BY e.id")


def connection_of(store):
    """The ConnectionConfig a MetadataStore was opened with (sqlite or MySQL), else None (a gRPC
    client). MLMD keeps it as the private `_config`: read defensively."""
    config = getattr(store, "_config", None)
    if not isinstance(config, metadata_store_pb2.ConnectionConfig):
        return None
    return config if config.HasField("sqlite") or config.HasField("mysql") else None


def artifact_events(store, artifact_id: int) -> tuple[tuple[int, int, int], ...] | None:
    """(execution id, event type, the execution's last known state) for every event on the
    artifact, in event order, with MLMD's enum numbers (metadata_store_pb2.Event.Type and
    Execution.State); None when the store's tables are not of a known schema version."""
    config = connection_of(store)
    if config is None:
        return None
    connect, error, mark = _driver(config)
    try:
        with contextlib.closing(connect()) as db:
            cursor = db.cursor()
            cursor.execute(_VERSION)
            if cursor.fetchone()[0] not in SCHEMA_VERSIONS:
                return None
            cursor.execute(_EVENTS.format(mark), (artifact_id,))
            return tuple(tuple(row) for row in cursor.fetchall())
    except error as err:
        raise MetadataStoreError(f"metadata store {describe(config)}: reading the events of "
                                 f"artifact {artifact_id}: {err}") from None


def _driver(config):
    """(a function opening a connection, the driver's error class, its parameter mark): a
    read-only sqlite connection, or a MySQL one to the store's database (connection.py)."""
    if config.HasField("sqlite"):
        import sqlite3
        return (lambda: open_sqlite_read_only(config.sqlite.filename_uri, timeout=10),
                sqlite3.Error, "?")
    import pymysql
    return lambda: open_mysql(config, database=config.mysql.database), pymysql.Error, "%s"
