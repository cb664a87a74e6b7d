"""Opening an MLMD store in benchmarks and tests by path or MySQL address, through the one opener
(pipeline/lineage/connection.py open_store): read-only unless the caller writes to it."""

from __future__ import annotations

from pipeline.lineage.connection import connection_config, open_store


def connect(sqlite_path: str | None = None, *, read_only: bool = True, **mysql):
    """The store at sqlite_path, or the MySQL one the mysql_* keywords name."""
    return open_store(connection_config(sqlite_path, read_only=read_only, **mysql))
