"""The bad-input matrix, fast half (no pipeline run, no TensorFlow): config files, metadata stores,
homes and a concurrent run. Each case asserts the message, the exit code, and that nothing already
written was changed. The slow half (kill -9 during training and push, disk full while writing
shards and checkpoints, input that matches nothing) is tests/e2e/test_bad_input.py."""

import hashlib
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from runners.cli import app as cli
from components.common.errors import EXIT_CONFIG, EXIT_HOME, EXIT_LOCKED, EXIT_STORE
from tests.support.mlmd import writable_store


def snapshot(root) -> dict:
    """{relative path: sha256} of every file under root: 'nothing lost or left partial'."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def run(capsys, *argv):
    capsys.readouterr()
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def make_store(path):
    """A real (empty) MLMD sqlite store with one run recorded."""
    from ml_metadata.proto import metadata_store_pb2
    store = writable_store(path)
    type_id = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline_run"))
    store.put_contexts([metadata_store_pb2.Context(type_id=type_id, name="run-1")])
    del store


# -- config ------------------------------------------------------------------------------------

def test_missing_config_file_names_the_file(tmp_path, capsys):
    code, _, err = run(capsys, "run", "--home", str(tmp_path / "home"), "--config", str(tmp_path / "nope.yaml"))
    assert code == EXIT_CONFIG
    assert f"--config {tmp_path / 'nope.yaml'}: cannot read the file: No such file or directory" in err
    assert "Traceback" not in err and not (tmp_path / "home").exists()  # nothing written


def test_malformed_config_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  learning_rate: 1e-3\n  train_steps: [1, 2\nmodel:\n  n_layer: 2\n")
    code, _, err = run(capsys, "run", "--home", str(tmp_path / "home"), "--config", str(bad))
    assert code == EXIT_CONFIG
    assert f"{bad}:4:" in err and "invalid YAML" in err, err
    assert "Traceback" not in err and not (tmp_path / "home").exists()


def test_unknown_key_in_config_file_names_its_line(tmp_path, capsys):
    bad = tmp_path / "typo.yaml"
    bad.write_text("train:\n  learning_rate: 0.001\n  warmup_stesp: 10\n")
    code, _, err = run(capsys, "config", "--config", str(bad))
    assert code == EXIT_CONFIG
    assert f"{bad}:3: unknown config key 'train.warmup_stesp' (did you mean 'warmup_steps'?)" in err, err


def test_bad_value_type_names_the_key(tmp_path, capsys):
    code, _, err = run(capsys, "run", "--home", str(tmp_path / "home"), "--set", "train.train_steps=many")
    assert code == EXIT_CONFIG and "train.train_steps: expected an integer, got 'many'" in err
    assert not (tmp_path / "home").exists()


# -- metadata stores ---------------------------------------------------------------------------

@pytest.mark.parametrize("damage, words", [
    ("garbage", "is not an SQLite database"),
    ("truncate", "is truncated"),
    ("empty", "is empty (0 bytes: truncated?)"),
    ("directory", "is not a file (a directory?)"),   # was an IsADirectoryError traceback
])
@pytest.mark.parametrize("command", ["run", "lineage"])
def test_damaged_store_is_a_named_error_and_left_as_is(tmp_path, capsys, damage, words, command):
    home = tmp_path / "home"
    home.mkdir()
    path = str(home / "metadata.sqlite")
    make_store(path)
    if damage == "garbage":
        with open(path, "r+b") as fh:
            fh.write(b"this is not a database at all" * 4)
    elif damage == "truncate":
        os.truncate(path, os.path.getsize(path) // 2)
    elif damage == "directory":
        os.remove(path)
        os.mkdir(path)
    else:
        os.truncate(path, 0)
    before = snapshot(home)
    argv = ["run", "--home", str(home)] if command == "run" else ["lineage", "runs", "--home", str(home)]
    code, _, err = run(capsys, *argv)
    assert code == EXIT_STORE, err
    assert f"metadata store {path} {words}" in err and "Traceback" not in err
    assert snapshot(home) == before  # a refused run removes the lock file it created


# A refusal's guard against a hang only: no speed check (the VM may be loaded; the commands
# import TensorFlow). What "fails fast" means is checked without a clock: the busy timeouts asked
# of sqlite, and a lock holder still holding when the refusal came.
HANG_GUARD_S = 300
SHORT_BUSY_TIMEOUT_S = 10


def test_store_locked_by_another_program_fails_fast_and_named(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    path = str(home / "metadata.sqlite")
    make_store(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    real_connect, busy_timeouts = sqlite3.connect, []

    def connect(*args, **kwargs):
        busy_timeouts.append(kwargs.get("timeout", args[1] if len(args) > 1 else 5.0))
        return real_connect(*args, **kwargs)
    monkeypatch.setattr(sqlite3, "connect", connect)
    try:
        start = time.monotonic()
        code, _, err = run(capsys, "lineage", "runs", "--home", str(home))
        assert code == EXIT_STORE and "is locked by another process" in err, err
        code, _, err = run(capsys, "run", "--home", str(home))
        assert code == EXIT_STORE and "is locked by another process" in err, err
        assert time.monotonic() - start < HANG_GUARD_S   # never a hang
        assert busy_timeouts and max(busy_timeouts) <= SHORT_BUSY_TIMEOUT_S, busy_timeouts
    finally:
        monkeypatch.undo()
        holder.execute("ROLLBACK")
        holder.close()
    code, out, _ = run(capsys, "lineage", "runs", "--home", str(home), "--json")
    assert code == 0 and '"run_id": "run-1"' in out  # the history is intact


def test_unreachable_mysql_is_a_named_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BIGTRAIN_METADATA_PASSWORD", "")  # set (empty): no password
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, err = run(capsys, "run", "--home", str(tmp_path / "home"), "--set", "metadata.backend=mysql",
                       "--set", f"metadata.mysql_port={port}")
    assert code == EXIT_STORE, err
    assert f"metadata store MySQL root@127.0.0.1:{port}/metadb" in err and "Traceback" not in err
    assert not (tmp_path / "home").exists()  # the home it created is gone, with its lock file
    code, _, err = run(capsys, "lineage", "runs", "--metadata", f"mysql://127.0.0.1:{port}")
    assert code == EXIT_STORE and f"127.0.0.1:{port}" in err


# -- homes -------------------------------------------------------------------------------------

def test_home_that_is_a_file_is_a_named_error(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    code, _, err = run(capsys, "run", "--home", str(afile / "home"))
    assert code == EXIT_HOME and f"cannot create home {afile / 'home'}" in err, err
    code, _, err = run(capsys, "run", "--home", str(afile))
    assert code == EXIT_HOME and "is not a directory" in err
    assert afile.read_text() == "keep me"


def test_unwritable_home_is_a_named_error(tmp_path, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("keep")
    if os.geteuid() != 0:
        home.chmod(0o500)
    elif subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(home)],
                        capture_output=True).returncode != 0:
        pytest.skip("root without a way to make a read-only directory (no mount)")
    try:
        code, _, err = run(capsys, "run", "--home", str(home))
        assert code == EXIT_HOME and f"home {home} is not writable" in err, err
        assert "Traceback" not in err
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(home)], check=True)
        else:
            home.chmod(0o700)
    assert (home / "keep.txt").read_text() == "keep"


def test_read_only_store_in_a_writable_home_is_a_named_error_and_still_readable(tmp_path, capsys):
    """Issue 41: sqlite opens a read-only file read-only without a word; the run's first write
    was MLMD's raw 'attempt to write a readonly database'. The store is made read-only by a
    read-only bind mount over the file (root passes permission checks, not a read-only mount);
    as another user, by its mode. Lineage still reads it."""
    home = tmp_path / "home"
    home.mkdir()
    path = str(home / "metadata.sqlite")
    make_store(path)
    if os.geteuid() != 0:
        os.chmod(path, 0o444)
    elif subprocess.run(["mount", "--bind", path, path], capture_output=True).returncode != 0:
        pytest.skip("root without a way to make a read-only file (no bind mount)")
    else:
        subprocess.run(["mount", "-o", "remount,ro,bind", path], check=True)
    try:
        before = snapshot(home)
        code, _, err = run(capsys, "run", "--home", str(home))
        assert code == EXIT_STORE, err
        assert f"metadata store {path} is read-only" in err and "Traceback" not in err, err
        after = snapshot(home)
        after.pop(".bigtrain.lock", None)
        assert after == before
        code, out, err = run(capsys, "lineage", "runs", "--home", str(home))
        assert code == 0, err
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "--lazy", path], check=True)   # lazy: a mutated run may hold it open
        else:
            os.chmod(path, 0o644)


def test_lineage_on_a_missing_home_is_a_named_error(tmp_path, capsys):
    code, _, err = run(capsys, "lineage", "runs", "--home", str(tmp_path / "nowhere"))
    assert code == EXIT_HOME and "does not exist" in err


# -- concurrent runs ---------------------------------------------------------------------------

HOLD = textwrap.dedent("""
    import sys, time
    from runners.local.lock import HomeLock
    with HomeLock(sys.argv[1], {"run_id": "holder"}):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def test_second_run_on_a_home_exits_at_once_naming_the_holder(tmp_path, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("keep")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(home), str(HANG_GUARD_S)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(home)                  # keep.txt and the holder's lock record
        code, _, err = run(capsys, "run", "--home", str(home))
        # "at once": refused while the holder still holds the lock (a run that waited for the
        # lock would get it only after the holder's HANG_GUARD_S, and then run: not EXIT_LOCKED)
        assert code == EXIT_LOCKED, err
        assert holder.poll() is None
        assert f"home {home} is in use by another run: pid {holder.pid} on {socket.gethostname()}" in err
        assert "started 20" in err and "command: " in err and str(home) in err
        # lineage reads never block on a running run
        code, _, err = run(capsys, "lineage", "runs", "--home", str(home))
        assert code == EXIT_STORE and "no metadata database" in err
    finally:
        holder.kill()
        holder.wait()
    # The refused run wrote nothing into the home (no run folder, no log, no store) and left the
    # holder's lock record as it was; keep.txt against its own bytes, not against a snapshot.
    assert snapshot(home) == before
    assert sorted(before) == [".bigtrain.lock", "keep.txt"]
    assert before["keep.txt"] == hashlib.sha256(b"keep").hexdigest()


def test_lock_of_a_dead_process_is_taken_over_with_a_note(tmp_path):
    from runners.local.lock import HomeLock, live_writer
    home = str(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    with open(os.path.join(home, ".bigtrain.lock"), "w") as fh:
        fh.write(f'{{"pid": {dead}, "host": "{socket.gethostname()}", "started": "then", '
                 f'"command": "bigtrain run", "run_id": "r0"}}')
    assert live_writer(home) is False  # readers see the holder is gone, without locking
    with HomeLock(home, {"run_id": "r1"}) as lock:
        assert lock.stale["pid"] == int(dead)
        assert f"took over the lock of a run that died without releasing it (pid {dead}" in lock.stale_note()
        assert live_writer(home) is True
    assert live_writer(home) is False  # released: the record is emptied


def test_lock_follows_a_lock_file_removed_while_locking(tmp_path, monkeypatch):
    """A refused run removes the lock file it created (while holding it); a run that opened that
    file just before locks a name no longer in the home, sees it (inode), and opens it again."""
    from runners.local.lock import HomeLock
    home = str(tmp_path)
    removed = os.open(os.path.join(home, ".bigtrain.lock"), os.O_RDWR | os.O_CREAT)
    os.remove(os.path.join(home, ".bigtrain.lock"))
    opens = iter([removed])
    real_open = HomeLock._open
    monkeypatch.setattr(HomeLock, "_open", lambda self: next(opens, None) or real_open(self))
    with HomeLock(home, {"run_id": "r1"}) as lock:
        assert lock.created and os.fstat(lock.fd).st_ino == os.stat(lock.path).st_ino
        lock.keep()
    assert os.listdir(home) == [".bigtrain.lock"]  # kept (the run wrote), emptied
    with HomeLock(home, {"run_id": "r2"}):
        pass
    assert os.listdir(home) == [".bigtrain.lock"]  # not created by r2: left as found


def test_traceback_only_with_verbose(tmp_path, capsys):
    missing = str(tmp_path / "nope.yaml")
    code, _, err = run(capsys, "run", "--home", str(tmp_path / "h"), "--config", missing)
    assert code == EXIT_CONFIG and "Traceback" not in err and err.count("\n") == 1
    code, _, err = run(capsys, "run", "-v", "--home", str(tmp_path / "h"), "--config", missing)
    assert code == EXIT_CONFIG and "Traceback (most recent call last)" in err
    assert err.rstrip().endswith(f"bigtrain: config error: --config {missing}: cannot read the file: "
                                 "No such file or directory")
