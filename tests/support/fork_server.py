"""Many short processes that import the same heavy modules, for the price of one import: a server
interpreter imports them once, then runs each command in a fork of itself, which exits when the
command ends. Airflow runs its tasks this way in production (LocalExecutor and
StandardTaskRunner fork after the imports), so a task still runs in its own process, with nothing
in memory from another task: only the imports are shared.

Measured 2026-11-28 on the Intel Xeon 2-core VM (tests/runners/test_airflow.py's 11 processes):
173.8 CPU-s as fresh interpreters (about 13 CPU-s each for TensorFlow, TFX and bigtrain's pipeline
before any work), 43.0 in one server's forks.

    with ForkServer(env, preload=["tensorflow"]) as server:
        code, output = server.airflow(["tasks", "test", "bigtrain", "Trainer", "run-1"])

The server: `python -m tests.support.fork_server MODULE...`; requests and replies are JSON lines
on its stdin and stdout (its own prints go to stderr)."""

from __future__ import annotations

import importlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ForkServer:
    """A server process with `preload` imported, in `env`; each call's output is returned whole.
    hang_guard_s: a guard against a hung command, not a speed limit."""

    def __init__(self, env: dict, preload: list[str], hang_guard_s: float = 3600):
        self._hang_guard_s = hang_guard_s
        self._logs = tempfile.mkdtemp(prefix="fork-server-")
        self._calls = 0
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.support.fork_server", *preload],
                                      env=env, cwd=ROOT, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=self._hang_guard_s)
        shutil.rmtree(self._logs, ignore_errors=True)   # our own temporary folder

    def airflow(self, args: list[str]) -> tuple[int, str]:
        """`airflow ARGS` through Airflow's own entry point."""
        return self._call({"airflow": args})

    def python(self, code: str, args: list[str]) -> tuple[int, str]:
        """`python -c CODE ARGS`: CODE runs as __main__ with sys.argv ["-c", *ARGS]."""
        return self._call({"code": code, "args": args})

    def _call(self, request: dict) -> tuple[int, str]:
        self._calls += 1
        request["log"] = os.path.join(self._logs, f"{self._calls}.log")
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=self._hang_guard_s):
                self._proc.kill()
                raise TimeoutError(f"fork server: no reply in {self._hang_guard_s} s to {request}")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server exited ({self._proc.wait()}) during {request}")
        with open(request["log"], encoding="utf-8", errors="replace") as fh:
            return json.loads(line)["exit_code"], fh.read()


def _run_in_child(request: dict) -> int:
    """In the fork: the command's stdout and stderr to its log, Airflow's fork preparation
    (airflow/task/task_runner/standard_task_runner.py: default signals, no shared DB handles)."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)   # stdin is the server's request pipe
    fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if "airflow" in sys.modules:
        from airflow import settings
        settings.engine.pool.dispose()
        settings.engine.dispose()
    try:
        if "airflow" in request:
            from airflow.__main__ import main
            sys.argv = ["airflow", *request["airflow"]]
            main()
        else:
            sys.argv = ["-c", *request["args"]]
            exec(compile(request["code"], "<-c>", "exec"), {"__name__": "__main__"})
        return 0
    except SystemExit as err:
        return err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    except BaseException:   # noqa: BLE001 (printed to the command's log, as an interpreter would)
        import traceback
        traceback.print_exc()
        return 1


def serve(preload: list[str]) -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # what imports print must not mix with the replies
    for name in preload:
        importlib.import_module(name)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()   # nothing buffered here may be written again by the fork
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _run_in_child(request)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"exit_code": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(sys.argv[1:])
