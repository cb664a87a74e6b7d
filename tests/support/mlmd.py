"""MLMD in tests: a new store to write records into (`writable_store`, a sqlite file, or
`memory_store`), how far a figure read back from a store may be from the one a stage recorded, and
the MariaDB server `make mariadb` started. Opening a store: benchmarks/support/mlmd.py `connect`
(benchmarks use it too and may not import tests/), which both helpers go through."""

from __future__ import annotations

import os


# MLMD's sqlite store writes a double into the text of its SQL statement with 6 decimals (fixed,
# not significant: 1.2e-9 reads back as 0.0): a figure read back is within half a unit of the 6th
# decimal of what the stage recorded (tests/pipeline/test_mlmd_rounding.py holds it to that).
MLMD_DECIMALS = 6


def writable_store(path):
    """The MLMD sqlite store at path (created when absent), open for writing through the product's
    one opener (pipeline/lineage/connection.py open_store): a test's records go into a store as
    `bigtrain run` opens it."""
    from benchmarks.support.mlmd import connect
    return connect(str(path), read_only=False)


def memory_store():
    """A new MLMD store in memory (MLMD's fake database): nothing on disk."""
    from ml_metadata.proto import metadata_store_pb2 as pb
    from pipeline.lineage.connection import open_store
    return open_store(pb.ConnectionConfig(fake_database=pb.FakeDatabaseConfig()))


def agree_after_rounding(value: float, expected: float, roundings: int) -> bool:
    """value == expected up to `roundings` independent roundings to MLMD_DECIMALS (each off by at
    most half a unit of the last decimal), plus float noise."""
    return abs(value - expected) <= roundings * 0.5 * 10.0**-MLMD_DECIMALS + 1e-12


MARIADB_DIR = os.environ.get("BIGTRAIN_MARIADB_DIR", os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "mariadb"))


def mysql_server() -> dict:
    """The MariaDB `make mariadb` started (its env file: host, port, user, password); skips
    naming the reason when it is not there, and fails in CI, where the MySQL tests must run."""
    import pytest
    env_file = os.path.join(MARIADB_DIR, "env")
    if not os.path.exists(env_file):
        reason = "MariaDB not started (run `make mariadb`, or `make test`)"
        unavailable = os.path.join(MARIADB_DIR, "unavailable")
        if os.path.exists(unavailable):
            reason = "MariaDB could not be installed: " + open(unavailable).read().strip()
        if os.environ.get("CI"):
            pytest.fail(reason + " -- in CI the MySQL tests must run")
        pytest.skip(reason)
    with open(env_file) as fh:
        return dict(line.strip().split("=", 1) for line in fh if "=" in line)
