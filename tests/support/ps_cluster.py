"""A parameter-server cluster for tests: two ps and two worker tasks serving on loopback (a module
fixture), and each task's TF_CONFIG environment."""

import json
import os

import portpicker
import pytest

from tests.support.multi_worker import BIGTRAIN


@pytest.fixture(scope="module")
def cluster(worker_server):
    """2 ps and 2 worker tasks serving on loopback until the module ends."""
    ports = {job: [portpicker.pick_unused_port() for _ in range(count)]
             for job, count in (("ps", 2), ("worker", 2), ("chief", 1))}
    spec = {job: [f"localhost:{p}" for p in found] for job, found in ports.items()}
    tasks = {}
    for job in ("ps", "worker"):
        for index in range(2):
            tasks[(job, index)] = worker_server.start(
                BIGTRAIN, ["bigtrain", "plumbing", "ps-task"], _env(spec, job, index))
    try:
        yield dict(spec=spec, tasks=tasks)
    finally:
        worker_server.kill(list(tasks.values()))


def _env(spec, job, index):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                TF_CONFIG=json.dumps({"cluster": spec, "task": {"type": job, "index": index}}))
