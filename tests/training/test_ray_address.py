"""runtime.ray.address that no Ray head answers: a RayJobError naming the setting at once (Ray's
own ray.init retries for minutes: over 150 s on 2026-12-07), before any training. No cluster
needed: a port just closed on loopback."""

import socket
import time

import pytest

from components.common.errors import BigtrainError
from components.training import ray_job


def test_an_address_nothing_answers_is_named_at_once():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]          # closed when the block ends: nothing listens
    started = time.monotonic()
    with pytest.raises(ray_job.RayJobError, match=rf"runtime\.ray\.address=127\.0\.0\.1:{port}"):
        ray_job.connect(f"127.0.0.1:{port}")
    assert time.monotonic() - started < 10
    assert issubclass(ray_job.RayJobError, BigtrainError)


def test_a_listening_address_passes_the_check():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        ray_job.check_reachable(f"127.0.0.1:{sock.getsockname()[1]}")
