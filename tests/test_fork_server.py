"""tests/support/fork_server.py, the server whose forks run the Airflow test's tasks, the KFP
contract's container tasks and the multi-worker tests' workers: each command
in its own process (nothing in memory from an earlier command), its exit status and its whole
output returned, its stdin not the server's request pipe. A small preload (json), no TensorFlow."""

import gc
import os
import signal
import subprocess
import sys

import pytest

from tests.support.collector import SUITE_THRESHOLDS
from tests.support.fork_server import ROOT, ForkServer, Started

ONE_GLOBAL = """
import sys, json
print("before", getattr(json, "SET_BY_A_COMMAND", None))
json.SET_BY_A_COMMAND = sys.argv[1]
print("pid", __import__("os").getpid())
"""


@pytest.fixture
def server():
    with ForkServer(dict(os.environ), ["json"], hang_guard_s=120) as s:   # each command: ~0.1 s
        yield s


def test_a_command_sees_nothing_an_earlier_one_set_in_memory(server):
    """Caught: commands run in the server itself (or in one long-lived child), so that a task
    could read what an upstream task left in a module."""
    outs = [server.python(ONE_GLOBAL, [value]) for value in ("first", "second")]
    assert [code for code, _ in outs] == [0, 0]
    assert all("before None" in out for _, out in outs), outs
    pids = {line.split()[1] for _, out in outs for line in out.splitlines() if line.startswith("pid")}
    assert len(pids) == 2 and str(os.getpid()) not in pids


def test_the_suites_processes_use_its_collector_thresholds(server):
    """tests/support/collector.py: pytest's process (conftest), and from start-up every process
    the suite's PYTHONPATH reaches (ledger_site/sitecustomize.py): a fresh interpreter, the fork
    server and so its forks. Caught: the call dropped there (Python's defaults: 700, 10, 10)."""
    from tests.support.ledger import SITE
    if SITE not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        pytest.skip("the ledger is off (--ledger ''): its start-up folder is not on PYTHONPATH")
    expected = " ".join(map(str, SUITE_THRESHOLDS))
    assert gc.get_threshold() == SUITE_THRESHOLDS
    fresh = subprocess.run([sys.executable, "-c", "import gc; print(*gc.get_threshold())"],
                           capture_output=True, text=True, check=True).stdout
    code, forked = server.python("import gc; print('thresholds', *gc.get_threshold())", [])
    assert (fresh.strip(), code) == (expected, 0) and f"thresholds {expected}" in forked, forked


@pytest.mark.parametrize("code, status", [("raise SystemExit(3)", 3), ("import sys; sys.exit()", 0),
                                          ("raise ValueError('boom')", 1), ("import os; os._exit(5)", 5)])
def test_the_exit_status_is_the_commands(server, code, status):
    got, out = server.python(code, [])
    assert got == status, out
    if "ValueError" in code:
        assert "ValueError: boom" in out   # the traceback, as an interpreter prints it


def test_stdout_and_stderr_are_returned_and_stdin_is_empty(server):
    """Caught: a command that reads stdin would read the server's next requests."""
    code, out = server.python("import sys; print('out'); print('err', file=sys.stderr); "
                              "print('stdin', repr(sys.stdin.read()))", [])
    assert code == 0 and "out" in out and "err" in out and "stdin ''" in out, out
    assert server.python("print('still serving')", [])[1].strip() == "still serving"


def test_a_command_runs_in_its_own_folder_and_the_next_in_the_servers(server, tmp_path):
    """What a KFP task needs (its own working folder, kfp_outputs/ relative to it). Caught: the
    folder ignored (the command runs in the repository root), or the server itself changing
    folder (the next command, started without one, would run in the first one's)."""
    code, out = server.run("tests.support.fork_server:exec_code",
                           ["-c", "import os; print(os.getcwd())"], cwd=str(tmp_path))
    assert (code, out.strip()) == (0, str(tmp_path)), out
    assert server.python("import os; print(os.getcwd())", [])[1].strip() == ROOT


def test_a_module_runs_as_main_with_its_arguments(server):
    """`python -m json.tool FILE`: the module's `if __name__ == "__main__"` block runs, with
    sys.argv[1:] its arguments (caught: the module merely imported, or its name left in argv).
    json.tool closes stdout when done: caught, a fork that flushed its closed stdout raised out of
    the command and exited 1 (seen before the fix)."""
    started = server.start_module("json.tool", ["--compact", os.path.join(ROOT, "tests", "suite_budget.json")])
    code, out, err = server.wait(started)
    assert code == 0 and out.startswith('{"_about":') and "\n" not in out.strip(), (out[:200], err)


AT_EXIT = "import atexit; atexit.register(lambda: print('at exit'))"


@pytest.mark.parametrize("interpreter_exit", [True, False])
def test_a_command_ends_as_an_interpreter_only_when_asked(server, interpreter_exit):
    """interpreter_exit (a KFP task's container process): atexit handlers and the C library's exit
    run, where a process can still fail after its work (caught, with the fork's os._exit always:
    no "at exit"); otherwise the fork ends as Airflow's forks do, without them."""
    started = server.start("tests.support.fork_server:exec_code", ["-c", AT_EXIT],
                           interpreter_exit=interpreter_exit)
    code, out, err = server.wait(started)
    assert (code, out, err) == (0, "at exit\n" if interpreter_exit else "", ""), (out, err)
    assert server.python("print('still serving')", [])[1].strip() == "still serving"


@pytest.mark.slow   # ~5 CPU-s: Airflow's imports
def test_an_airflow_command_runs_airflows_entry_point(tmp_path):
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    with ForkServer(env, ["airflow.__main__"], hang_guard_s=600) as s:
        code, out = s.airflow(["version"])
    import airflow
    assert code == 0 and out.strip().splitlines()[-1] == airflow.__version__, out


WAIT_FOR_FILE = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
print("saw it", os.environ["ONLY_HERE"])
"""


def test_started_commands_run_at_the_same_time_each_in_its_own_environment(server, tmp_path):
    """What two training workers need: the first command waits for a file the second creates, so
    it ends only if both run at once (a server that ran a command to its end before starting the
    next would hang until the guard); each sees the environment it was started with."""
    flag = str(tmp_path / "flag")
    entry = "tests.support.fork_server:exec_code"
    waiting = server.start(entry, ["-c", WAIT_FOR_FILE, flag], env=dict(os.environ, ONLY_HERE="first"))
    creating = server.start(entry, ["-c", f"open({flag!r}, 'w').close()"], env={"ONLY_HERE": "second"})
    assert server.wait(creating)[0] == 0
    code, out, err = server.wait(waiting)
    assert (code, out.strip(), err) == (0, "saw it first", ""), (out, err)
    assert "ONLY_HERE" not in os.environ


def test_a_hung_command_is_killed_and_the_server_goes_on(tmp_path):
    """The hang guard ends the command, not the server, and the next reply is the next
    command's: caught, a wait that leaves its reply unread (the next `start` read the stale
    exit status: KeyError 'pid'). The command never ends by itself; the guard is its only end."""
    with ForkServer(dict(os.environ), ["json"], hang_guard_s=2) as s:
        with pytest.raises(TimeoutError, match="no reply in 2 s"):
            s.python("import threading; threading.Event().wait()", [])
        assert s.python("print('next')", []) == (0, "next\n")


def test_kill_leaves_a_reaped_childs_pid_alone(server):
    """A child that was waited for is reaped, and its pid may be another process's by now: kill
    must not signal it. Caught: kill signalling every pid it is given (the stand-in for the
    reused pid, a `sleep` of this test, dies by SIGKILL instead of the SIGTERM sent after)."""
    done = server.start("tests.support.fork_server:exec_code", ["-c", "pass"])
    assert server.wait(done)[0] == 0
    other = subprocess.Popen(["sleep", "600"])
    server.kill([Started(other.pid, done.stdout, done.stderr)])   # as if the pid were reused
    other.terminate()
    assert other.wait() == -signal.SIGTERM


SIGNALLED = """
import os, sys, time
print("group", os.getpgid(0) == os.getpid(), "session", os.getsid(0) == os.getpid(), flush=True)
print("to stderr", file=sys.stderr, flush=True)
try:   # the flag inside: a SIGINT as soon as it exists lands here
    open(sys.argv[1], "w").close()
    for _ in range(12000):   # short sleeps: a signal that comes just before a sleep's system
        time.sleep(0.05)     # call is handled at the next one, not after the whole sleep
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    raise SystemExit(130)
"""


@pytest.mark.parametrize("new_session", [True, False])
def test_a_popen_like_fork_is_polled_signalled_and_leads_its_own_group(server, tmp_path,
                                                                       new_session):
    """What the e2e tests of signalled `bigtrain` runs use (Forked): poll while it runs and after,
    SIGINT seen as KeyboardInterrupt (a fresh interpreter's handler), stdout and stderr in one
    file, and with new_session a process group of its own for killpg. Caught: SIGINT left at the
    default action (exit -2, nothing printed), a poll that blocks or reaps without keeping the
    status for the wait (ChildProcessError), no setsid (group False)."""
    flag, output = tmp_path / "started", str(tmp_path / "out")
    proc = server.popen("tests.support.fork_server:exec_code", ["-c", SIGNALLED, str(flag)],
                        interpreter_exit=True, output=output, new_session=new_session)
    while not flag.exists():
        assert proc.poll() is None, open(output).read()
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130 and proc.poll() == 130, open(output).read()
    assert open(output).read().splitlines() == [
        f"group {new_session} session {new_session}", "to stderr", "KeyboardInterrupt"]
    proc.kill()   # an ended fork: nothing to signal, no error
    sleeper = server.popen("tests.support.fork_server:exec_code", ["-c", "import time; time.sleep(600)"])
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.2)
    sleeper.kill()   # not left behind for 10 minutes (the server's close does not end its forks)
    assert sleeper.wait(timeout=120) == -signal.SIGKILL


def test_a_command_gets_the_temp_folder_of_its_own_environment(tmp_path):
    """A fork inherits the server's cached tempfile.tempdir; a command started with TMPDIR set
    must write there (the interrupt test checks what Beam leaves in it). Caught: the cache kept
    (the command prints the server's temp folder)."""
    server_tmp = tmp_path / "server"
    server_tmp.mkdir()
    (tmp_path / "caches_tempdir.py").write_text("import tempfile\ntempfile.gettempdir()\n")
    env = dict(os.environ, TMPDIR=str(server_tmp),
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    with ForkServer(env, ["caches_tempdir"], hang_guard_s=120) as s:   # as TF's imports may
        assert s.python("import tempfile; print(tempfile.tempdir)", [])[1].strip() == str(server_tmp)
        started = s.start("tests.support.fork_server:exec_code",
                          ["-c", "import tempfile; print(tempfile.gettempdir())"],
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
        code, out, _ = s.wait(started)
    assert (code, out.strip()) == (0, str(tmp_path))


def test_the_bigtrain_entry_is_the_console_scripts():
    """Forked `bigtrain` runs call what the installed script calls (caught: a renamed entry point
    the forks would not follow)."""
    import tomllib
    from tests.support.fork_server import BIGTRAIN_ENTRY
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        assert tomllib.load(fh)["project"]["scripts"]["bigtrain"] == BIGTRAIN_ENTRY


BURN = """
import sys, time
while time.process_time() < float(sys.argv[1]):   # CPU-s, not wall: a busy loop
    pass
"""


@pytest.mark.parametrize("reaped_by", ["wait", "poll"])
def test_a_forks_cpu_counts_once_in_the_waiting_process(reaped_by):
    """The test-cost ledger reads this process's CPU-s (tests/support/ledger.cpu_seconds): a fork
    is the server's child, so its CPU reaches our RUSAGE_CHILDREN only when the server exits, at
    whichever test closes a session's server. The reply that reaps a fork carries its CPU-s,
    credited at once; the server's exit takes the credit back. A fork burns 1 CPU-s (its own
    clock, so load cannot change it); the server without preload starts in ~0.05 CPU-s.
    Caught: no credit (the fork's second is missing after the wait: delta < 1), the credit not
    taken back at the server's exit (the second counted twice: delta >= 2), a poll that reaps
    without crediting."""
    from tests.support.ledger import cpu_seconds
    start = sum(cpu_seconds())
    with ForkServer(dict(os.environ), [], hang_guard_s=120) as s:
        if reaped_by == "wait":
            assert s.python(BURN, ["1.0"])[0] == 0
        else:
            proc = s.popen("tests.support.fork_server:exec_code", ["-c", BURN, "1.0"])
            assert proc.wait(timeout=120) == 0   # polls, asleep between (Forked.wait)
            assert s.poll(proc._started) == 0   # asked again: reaps nothing, credits nothing
        after_fork = sum(cpu_seconds()) - start
        assert 1.0 <= after_fork < 2.0, after_fork
    after_exit = sum(cpu_seconds()) - start
    assert 1.0 <= after_exit < 2.0, after_exit
