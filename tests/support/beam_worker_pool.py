"""A Beam SDK worker pool on loopback (`python -m apache_beam.runners.worker.worker_pool_main`):
the Fn API path Flink, Spark and Dataflow use. Each SDK worker it starts is a separate `python`
process (a child of the pool), so a pipeline run with PORTABLE_ARGS executes no DoFn in the
launching process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def portable_args(port: int) -> list[str]:
    """PortableRunner with the embedded job service (Beam's Python Fn API runner as the job
    server; it asks the pool for one SDK worker), SDK workers from the pool on `port`."""
    return ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
            f"--environment_config=localhost:{port}"]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker pool exited with status {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"worker pool not listening on 127.0.0.1:{port} after {timeout:.0f} s")


@contextlib.contextmanager
def worker_pool(log_path: str, timeout: float = 120.0, worker_bin: str | None = None):
    """Start a pool (in its own process group), yield (port, pool process); kill the group after.

    The pool starts workers as `python -c ...` from PATH: the venv's bin (or worker_bin) goes
    first, and the repo root is the working directory and on PYTHONPATH so workers import the
    product's modules."""
    port = free_port()
    env = dict(os.environ, PATH=(worker_bin or os.path.dirname(sys.executable)) + os.pathsep + os.environ["PATH"],
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
             f"--service_port={port}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        _wait_for_port(port, proc, timeout)
        yield port, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def worker_pids(pool: subprocess.Popen) -> list[int]:
    """The SDK worker processes the pool has started (its live children)."""
    import psutil
    return [child.pid for child in psutil.Process(pool.pid).children(recursive=True)]
