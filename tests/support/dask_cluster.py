"""The Dask cluster the tests of Beam's DaskRunner use: the one `make dask` starts
(tests/support/dask.sh: a scheduler on loopback and 2 worker processes, its state in
build/dask/, or BIGTRAIN_DASK_DIR)."""

import os

from tests.support.services import ROOT, service_env

DASK_DIR = os.environ.get("BIGTRAIN_DASK_DIR", os.path.join(ROOT, "build", "dask"))


def dask_address() -> str:
    """BIGTRAIN_DASK_ADDRESS of build/dask/env.sh, or skip (fail in CI) naming the reason."""
    return service_env(DASK_DIR, "Dask cluster", "dask")["BIGTRAIN_DASK_ADDRESS"]


def worker_pids(address: str) -> set[int]:
    """The process ids of the cluster's workers."""
    from distributed import Client
    with Client(address, timeout=10) as client:
        return set(client.run(os.getpid).values())
