"""The events of one artifact read straight from a sqlite store's Event table: the one read in
lineage whose size grows with the history. An artifact shared by cached runs has an event per
run that reused it (30,000 at 10,000 runs); MLMD's GetEventsByArtifactIDs builds each with its
path, 0.27 s per artifact here, and an artifact page reaches five such artifacts. One indexed
query with the reading executions' states takes 0.05 s (docs/benchmarks.md "Lineage at scale").

Why by hand: MLMD has no paged or aggregated event read, and its filter queries (which could do
this) are being removed upstream (google/ml-metadata#226). The query uses only the Event and
Execution columns of MLMD's schema version 10 (the one MLMD 1.16 writes), checked before each
read; any other version, and every MySQL store, is read through MLMD as before (store.py)."""

from __future__ import annotations

import contextlib
import sqlite3

from components.common.errors import MetadataStoreError
from pipeline.lineage.connection import MLMD_MARKER_TABLE

SCHEMA_VERSIONS = (10,)   # the Event and Execution columns below are those of these versions


def sqlite_path(store) -> str | None:
    """The sqlite file a MetadataStore was opened on, else None (MySQL, or a gRPC client).
    MLMD keeps its ConnectionConfig as the private `_config`: read defensively."""
    config = getattr(store, "_config", None)
    if config is None or not hasattr(config, "HasField") or not config.HasField("sqlite"):
        return None
    path = config.sqlite.filename_uri
    return path if path and not path.startswith("file:") else None


def artifact_events(store, artifact_id: int) -> tuple[tuple[int, int, int], ...] | None:
    """(execution id, event type, the execution's last known state) for every event on the
    artifact, in event order, with MLMD's enum numbers (metadata_store_pb2.Event.Type and
    Execution.State); None when the store is not a sqlite file of a known schema version."""
    path = sqlite_path(store)
    if path is None:
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as db:
            (version,) = db.execute(f"SELECT schema_version FROM {MLMD_MARKER_TABLE}").fetchone()
            if version not in SCHEMA_VERSIONS:
                return None
            return tuple(db.execute(
                "SELECT e.execution_id, e.type, COALESCE(x.last_known_state, 0) FROM Event e "
                "JOIN Execution x ON x.id = e.execution_id WHERE e.artifact_id = ? ORDER BY e.id",
                (artifact_id,)))
    except sqlite3.Error as err:
        raise MetadataStoreError(f"metadata store {path}: reading the events of artifact "
                                 f"{artifact_id}: {err}") from None
