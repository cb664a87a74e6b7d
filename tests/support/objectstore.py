"""The S3 server `make objectstore` starts (tests/support/objectstore.sh): its environment, or a
skip naming why it is absent (in CI, where it must be there, a failure instead)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
import uuid

from tests.support.services import ROOT, service_env

OBJECTSTORE_DIR = os.environ.get("BIGTRAIN_OBJECTSTORE_DIR", os.path.join(ROOT, "build", "objectstore"))


def objectstore_env() -> dict[str, str]:
    """The exports of build/objectstore/env.sh, or skip (fail in CI) naming the reason."""
    return service_env(OBJECTSTORE_DIR, "S3 server", "objectstore")


def use_objectstore(monkeypatch) -> str:
    """Point this process at the S3 server; returns a fresh s3:// prefix for one test."""
    env = objectstore_env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return f"s3://{env['BIGTRAIN_S3_BUCKET']}/tests/{uuid.uuid4().hex[:12]}"


def record_s3_attempts(monkeypatch) -> list[str]:
    """A list that gets "METHOD url" of every HTTP attempt boto3 makes in this process
    from now on, retries included (botocore's Endpoint._send runs once per attempt): the count
    shows a bounded check, where a wall-time limit would also count a cold TensorFlow import."""
    import botocore.endpoint
    attempts: list[str] = []
    send = botocore.endpoint.Endpoint._send

    def counted_send(endpoint, request):
        attempts.append(f"{request.method} {request.url}")
        return send(endpoint, request)
    monkeypatch.setattr(botocore.endpoint.Endpoint, "_send", counted_send)
    return attempts


@contextlib.contextmanager
def moto_server(log_path: str, **environment: str):
    """A second moto server of the objectstore venv on a free loopback port (the shared one keeps
    accepting any credentials); yields its endpoint; killed after. Skips like objectstore_env."""
    objectstore_env()
    binary = os.path.join(OBJECTSTORE_DIR, "venv", "bin", "moto_server")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([binary, "-H", "127.0.0.1", "-p", str(port)], stdout=log,
                                stderr=subprocess.STDOUT, env=dict(os.environ, **environment))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not answer on {endpoint} (log {log_path})")
                time.sleep(0.3)
        yield endpoint
    finally:
        proc.kill()
        proc.wait()
