"""Many short processes that import the same heavy modules, for the price of one import: a server
interpreter imports them once, then runs each command in a fork of itself, which exits when the
command ends. Airflow runs its tasks this way in production (LocalExecutor and
StandardTaskRunner fork after the imports), so a task still runs in its own process, with nothing
in memory from another task: only the imports are shared. The preloaded modules must not start
TensorFlow's runtime (no op at import time): a fork would inherit it without its threads. Threads
that imports start (OpenBLAS's, jemalloc's and Arrow's pools) have fork handlers of their own.

Measured 2026-11-28 on the Intel Xeon 2-core VM (tests/runners/test_airflow.py's 11 processes):
173.8 CPU-s as fresh interpreters (about 13 CPU-s each for TensorFlow, TFX and bigtrain's pipeline
before any work), 43.0 in one server's forks.

    with ForkServer(env, preload=["tensorflow"]) as server:
        code, output = server.airflow(["tasks", "test", "bigtrain", "Trainer", "run-1"])
        a, b = server.start(ENTRY, argv_a, env_a), server.start(ENTRY, argv_b, env_b)  # at once
        (code_a, out_a, err_a), (code_b, out_b, err_b) = server.wait(a), server.wait(b)

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
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AIRFLOW = "airflow.__main__:main"
# What a `bigtrain` process spends its start on before any work (~10-13 CPU-s as a fresh
# interpreter): third-party modules only, so that no bigtrain module reads its environment at
# import (components/push: BIGTRAIN_PUSH_*) in the server instead of in the command.
BIGTRAIN_ENTRY = "runners.cli.app:console_main"   # pyproject.toml's [project.scripts] bigtrain
BIGTRAIN_IMPORTS = ["tensorflow", "keras", "apache_beam", "tfx.components",
                    "tfx.orchestration.local.local_dag_runner"]
# The session server's (tests/conftest.py bigtrain_server) guard against a hung fork (a `bigtrain`
# run, a train-worker waiting for a peer that never comes), not a speed check: far above any run
# a test starts.
SESSION_HANG_GUARD_S = 1800


# CPU-s of the forks that servers of this process reaped and that the servers' own exit has not
# yet brought into this process's RUSAGE_CHILDREN (a fork is the server's child, not ours). The
# test-cost ledger adds it, so a fork's CPU counts in the test that waited for it, and once.
_forks_cpu_s = [0.0]


def forks_cpu_seconds() -> float:
    return _forks_cpu_s[0]


@dataclass(frozen=True)
class Started:
    pid: int
    stdout: str
    stderr: str


class ForkServer:
    """A server process with `preload` imported, in `env`. hang_guard_s: a guard against a hung
    command (it is killed), not a speed limit."""

    def __init__(self, env: dict, preload: list[str], hang_guard_s: float = 3600):
        self._hang_guard_s = hang_guard_s
        self._logs = tempfile.mkdtemp(prefix="fork-server-")
        self._calls = 0
        self._running: set[int] = set()   # started and not yet reaped by a `wait`
        self._forks_cpu_s = 0.0           # what this server's reaped forks added to _forks_cpu_s
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
        # Reaped: its RUSAGE_CHILDREN, in ours now, holds the forks' CPU-s credited before.
        _forks_cpu_s[0] -= self._forks_cpu_s
        self._forks_cpu_s = 0.0
        shutil.rmtree(self._logs, ignore_errors=True)   # our own temporary folder

    def start(self, entry: str, argv: list[str], env: dict | None = None,
              cwd: str | None = None, interpreter_exit: bool = False,
              output: str | tuple[str, str] | None = None, new_session: bool = False) -> Started:
        """Forks a child that calls ENTRY ("module:function") with sys.argv = ARGV, as a console
        script does, in ENV (default: the server's) and the folder CWD (default: the server's,
        the repository root); returns at once. interpreter_exit: the child ends as an
        interpreter does (see _child), not as an Airflow fork. output: one file for stdout and
        stderr together, or a (stdout, stderr) pair of files (default: two of the server's).
        new_session: the child leads a session and process group of its own (Popen's
        start_new_session)."""
        self._calls += 1
        if output is None:
            logs = [os.path.join(self._logs, f"{self._calls}.{name}") for name in ("out", "err")]
        else:
            logs = [output, output] if isinstance(output, str) else list(output)
        reply = self._ask({"entry": entry, "argv": argv, "env": env, "cwd": cwd,
                           "interpreter_exit": interpreter_exit, "new_session": new_session,
                           "stdout": logs[0], "stderr": logs[1]})
        self._running.add(reply["pid"])
        return Started(reply["pid"], *logs)

    def poll(self, started: Started) -> int | None:
        """The child's exit status once it has ended (the server reaps it), else None."""
        code = self._ask({"poll": started.pid})["exit_code"]
        if code is not None:
            self._running.discard(started.pid)
        return code

    def wait(self, started: Started) -> tuple[int, str, str]:
        """The child's exit status, stdout and stderr; killed after hang_guard_s (TimeoutError)."""
        try:
            reply = self._ask({"wait": started.pid})
        except TimeoutError:
            os.kill(started.pid, signal.SIGKILL)
            self._credit(json.loads(self._proc.stdout.readline()))   # the wait's reply, once reaped
            raise
        finally:
            self._running.discard(started.pid)
        return (reply["exit_code"], *(_read(path) for path in (started.stdout, started.stderr)))

    def kill(self, started: list[Started]) -> None:
        """SIGKILL to those not yet waited for (a worker whose peer failed would wait for it
        forever); the server reaps them when it exits. A reaped child's pid may belong to another
        process by now: it is left alone."""
        for child in started:
            if child.pid in self._running:
                self._running.discard(child.pid)
                os.kill(child.pid, signal.SIGKILL)

    def run(self, entry: str, argv: list[str], env: dict | None = None,
            cwd: str | None = None) -> tuple[int, str]:
        code, out, err = self.wait(self.start(entry, argv, env, cwd))
        return code, out + err

    def start_module(self, module: str, args: list[str], env: dict | None = None,
                     cwd: str | None = None, **options) -> Started:
        """`python -m MODULE ARGS`, started as `start` starts a command (options: its output,
        new_session); it ends as that interpreter would (interpreter_exit)."""
        return self.start("tests.support.fork_server:run_module", ["-m", module, *args], env, cwd,
                          interpreter_exit=True, **options)

    def popen(self, entry: str, argv: list[str], env: dict | None = None,
              **options) -> "Forked":
        """A command started as `start` starts it (options: start's), as a Popen-like handle
        (Forked), for tests that signal a process and watch it end."""
        return Forked(self, self.start(entry, argv, env, **options))

    def popen_module(self, module: str, args: list[str], env: dict | None = None,
                     **options) -> "Forked":
        """`python -m MODULE ARGS` as start_module starts it, as a Popen-like handle (Forked), for
        tests that signal a process and watch it end."""
        return Forked(self, self.start_module(module, args, env, **options))

    def bigtrain(self, args: list[str], env: dict | None = None, **options) -> "Forked":
        """`bigtrain ARGS` as the console script runs it (its entry point, sys.argv[0] the
        script's path: a lock's holder names that command), ending as an interpreter ends; a
        Popen-like handle (Forked). options: start's output and new_session."""
        script = os.path.join(os.path.dirname(sys.executable), "bigtrain")
        env = dict(os.environ) if env is None else env   # as Popen: the caller's, not the server's
        return self.popen(BIGTRAIN_ENTRY, [script, *args], env, interpreter_exit=True, **options)

    def airflow(self, args: list[str]) -> tuple[int, str]:
        """`airflow ARGS` through Airflow's own entry point: exit status, stdout + stderr."""
        return self.run(AIRFLOW, ["airflow", *args])

    def python(self, code: str, args: list[str]) -> tuple[int, str]:
        """`python -c CODE ARGS`: CODE runs as __main__ with sys.argv ["-c", *ARGS]."""
        return self.run("tests.support.fork_server:exec_code", ["-c", code, *args])

    def _ask(self, request: dict) -> dict:
        """The server's reply; TimeoutError after hang_guard_s (a `start` that gets no reply
        means the server itself hangs: it is killed; a `wait` is the caller's to end)."""
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        shown = {key: value for key, value in request.items() if key != "env"}
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=self._hang_guard_s):
                if "wait" not in request:
                    self._proc.kill()
                raise TimeoutError(f"fork server: no reply in {self._hang_guard_s} s to {shown}")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server exited ({self._proc.wait()}) during {shown}")
        return self._credit(json.loads(line))

    def _credit(self, reply: dict) -> dict:
        """A reply that reaped a fork carries its CPU-s (once): credited to this process."""
        cpu_s = reply.get("cpu_s", 0.0)
        self._forks_cpu_s += cpu_s
        _forks_cpu_s[0] += cpu_s
        return reply


class Forked:
    """What a test of a signalled process uses of subprocess.Popen (pid, poll, wait with a
    timeout, kill, returncode), for a fork of the server."""

    def __init__(self, server: ForkServer, started: Started):
        self._server, self._started = server, started
        self.pid, self.returncode = started.pid, None
        self.stdout, self.stderr = started.stdout, started.stderr   # the files

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.poll(self._started)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Polls (the server stays free for other requests); subprocess.TimeoutExpired after
        timeout seconds, as Popen.wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"fork {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            self._server.kill([self._started])

    def read(self) -> tuple[str, str]:
        """What it has written so far to stdout and stderr (the same text twice when one file
        holds both)."""
        return _read(self.stdout), _read(self.stderr)


def _read(path: str) -> str:
    """The file's text; "" before the fork has opened it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def exec_code() -> None:
    """`python -c`: sys.argv is ["-c", CODE, *ARGS]; CODE runs with sys.argv ["-c", *ARGS]."""
    code = sys.argv.pop(1)
    exec(compile(code, "<-c>", "exec"), {"__name__": "__main__"})


def run_module() -> None:
    """`python -m`: sys.argv is ["-m", MODULE, *ARGS]; MODULE runs as __main__ with sys.argv
    [its file, *ARGS] (runpy, as the interpreter's -m does)."""
    import runpy
    module = sys.argv.pop(1)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def _run_in_child(request: dict) -> int:
    """In the fork: its environment, stdin empty, stdout and stderr to its logs, and Airflow's
    fork preparation (airflow/task/task_runner/standard_task_runner.py: default signals, no
    shared DB handles); then the entry point, whose exit status is the child's."""
    if request.get("new_session"):
        os.setsid()
    if request["env"] is not None:
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None   # gettempdir() caches the server's TMPDIR: read this one's
    if request.get("cwd"):
        os.chdir(request["cwd"])
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)   # stdin is the server's request pipe
    os.dup2(os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
    if request["stderr"] == request["stdout"]:
        os.dup2(1, 2)   # one file, as Popen's stderr=STDOUT
    else:
        os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    # An interpreter starts with Python's SIGINT handler (KeyboardInterrupt); Airflow's forks
    # with the default action.
    signal.signal(signal.SIGINT, signal.default_int_handler if request.get("interpreter_exit")
                  else signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if "airflow.settings" in sys.modules:
        from airflow import settings
        settings.engine.pool.dispose()
        settings.engine.dispose()
    module, function = request["entry"].split(":")
    sys.argv = list(request["argv"])
    try:
        result = getattr(importlib.import_module(module), function)()
        return result if isinstance(result, int) else 0
    except SystemExit as err:
        return err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    except BaseException:   # noqa: BLE001 (printed to the command's stderr, as an interpreter would)
        import traceback
        traceback.print_exc()
        return 1


def _child(request: dict) -> None:
    """The fork's whole life. It ends as Airflow's forks end (os._exit: no atexit handlers, no
    C++ static destructors), or with request["interpreter_exit"] as an interpreter ends (Python's
    finalization, then the C library's exit): a command whose process can fail at exit after its
    work (tensorflow-io's S3 client aborts there: components/storage/fs.py exit_process) is seen
    failing only then."""
    code = 1
    try:
        code = _run_in_child(request)
    finally:   # a command may close its streams (json.tool closes stdout)
        for stream in (sys.stdout, sys.stderr):
            if not stream.closed:
                stream.flush()
        if not request.get("interpreter_exit"):
            os._exit(code)
    sys.exit(code)   # out of serve(): the server's loop is the parent's


def _reap(pid: int, options: int = 0) -> tuple[int | None, float]:
    """(exit status or None if still running, its CPU-s: user + sys of the child and the
    children it reaped, as wait4 reports them)."""
    done, status, usage = os.wait4(pid, options)
    if not done:
        return None, 0.0
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def serve(preload: list[str]) -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)   # what imports print must not mix with the replies
    for name in preload:
        importlib.import_module(name)
    ended = {}   # pid: exit status of a child a poll reaped, for its wait
    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request or "poll" in request:
            pid = request.get("wait", request.get("poll"))
            reply = {"exit_code": ended.get(pid)}
            if pid not in ended:   # the reply that reaps the child carries its CPU-s, once
                code, cpu_s = _reap(pid, 0 if "wait" in request else os.WNOHANG)
                if code is not None:
                    ended[pid] = reply["exit_code"] = code
                    reply["cpu_s"] = cpu_s
            if "wait" in request:
                ended.pop(pid, None)
        else:
            sys.stdout.flush()   # nothing buffered here may be written again by the fork
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(request)
            reply = {"pid": pid}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(sys.argv[1:])
