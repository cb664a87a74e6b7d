"""Opening an MLMD store in tests and benchmarks by path or MySQL address, through the one opener
(pipeline/lineage/connection.py open_store): read-only unless a test writes to it."""

from __future__ import annotations

from pipeline.lineage.connection import connection_config, open_store


def connect(sqlite_path: str | None = None, *, read_only: bool = True, **mysql):
    """The store at sqlite_path, or the MySQL one the mysql_* keywords name."""
    return open_store(connection_config(sqlite_path, read_only=read_only, **mysql))


# MLMD's sqlite store writes a double into the text of its SQL statement with 6 decimals (fixed,
# not significant: 1.2e-9 reads back as 0.0): a figure read back is within half a unit of the 6th
# decimal of what the stage recorded (tests/pipeline/test_mlmd_rounding.py holds it to that).
MLMD_DECIMALS = 6


def agree_after_rounding(value: float, expected: float, roundings: int) -> bool:
    """value == expected up to `roundings` independent roundings to MLMD_DECIMALS (each off by at
    most half a unit of the last decimal), plus float noise."""
    return abs(value - expected) <= roundings * 0.5 * 10.0**-MLMD_DECIMALS + 1e-12
