"""An object store that stops answering (a closed loopback port: what a stopped S3 server looks
like) is ObjectStoreError (exit 8) naming the URI, in one short line, within a bound, from every
fs call and from a run whose stage failed on it.

Catches: tensorflow-io's "does not exist" for an unreachable endpoint believed (exists() False,
listdir() [], a read's FileNotFoundError: a lost store read as an empty one); the AWS SDK's
default retry mode (10 attempts, about 51 s per call, AWS_MAX_ATTEMPTS ignored); TensorFlow's
graph stack inside the message; a stage failure on a lost store reported as exit 1."""

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from components.storage import fs
from components.common.errors import ObjectStoreError
from runners.cli import app as cli
from runners.local import run as local
from runners.local.home import check_home

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Seconds one fs call may take against a stopped endpoint, imports done before (the probe): about
# 2 to 5 s with the bounded retries, 51 s with the SDK's default ones. A bound far above the
# need: the calls' retries are in tensorflow-io's C++ client, where Python cannot count them.
CALL_BOUND_S = 30


def closed_endpoint() -> str:
    """http://127.0.0.1:<port> where nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def stopped_store_env(endpoint: str) -> dict[str, str]:
    """The environment of tests/support/objectstore.sh's env.sh, pointing at endpoint; no retry
    settings of its own (fs's defaults are under test)."""
    env = {k: v for k, v in os.environ.items() if k not in fs.S3_CLIENT_DEFAULTS}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
               AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint, S3_ENDPOINT=endpoint,
               S3_USE_HTTPS="0", S3_VERIFY_SSL="0", AWS_EC2_METADATA_DISABLED="true",
               PYTHONPATH=ROOT)
    return env


# Runs in a fresh process: tensorflow-io reads its endpoint and retry settings once per process.
PROBE = textwrap.dedent("""
    import json, sys, time
    from components.storage import fs
    fs._load_s3()  # tensorflow and tensorflow-io imported before any call is timed
    calls = {
        "exists": lambda: fs.exists("s3://bucket/root/a.json"),
        "isdir": lambda: fs.isdir("s3://bucket/root"),
        "listdir": lambda: fs.listdir("s3://bucket/root"),
        "read_text": lambda: fs.read_text("s3://bucket/root/a.json"),
        "write_text": lambda: fs.write_text("s3://bucket/root/b.json", "{}"),
        "walk_files": lambda: list(fs.walk_files("s3://bucket/root")),
        "remove": lambda: fs.remove("s3://bucket/root/a.json"),
    }
    outcomes = {}
    for name, call in calls.items():
        started = time.monotonic()
        try:
            outcomes[name] = {"returned": repr(call())}
        except Exception as err:
            outcomes[name] = {"error": type(err).__name__, "message": str(err),
                              "exit_code": getattr(err, "exit_code", None)}
        outcomes[name]["seconds"] = time.monotonic() - started
    print("OUTCOMES " + json.dumps(outcomes), flush=True)
    fs.exit_process(0)
""")


@pytest.fixture(scope="module")
def outcomes():
    """{fs call: its outcome} against a stopped endpoint, from one fresh process."""
    proc = subprocess.run([sys.executable, "-c", PROBE], env=stopped_store_env(closed_endpoint()),
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("OUTCOMES ")), None)
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("OUTCOMES "):])


# Slow tier: its one probe process (6.2 CPU-s, the ledger of 2026-11-28) waits out each call's
# bounded retries, ~30 s of wall for the 7 calls.
@pytest.mark.slow
@pytest.mark.parametrize("call, uri", [
    ("exists", "s3://bucket/root/a.json"), ("isdir", "s3://bucket/root"),
    ("listdir", "s3://bucket/root"), ("read_text", "s3://bucket/root/a.json"),
    ("write_text", "s3://bucket/root/b.json"), ("walk_files", "s3://bucket/root"),
    ("remove", "s3://bucket/root/a.json")])
def test_every_fs_call_on_a_stopped_store_is_a_short_named_error(outcomes, call, uri):
    outcome = outcomes[call]
    assert outcome.get("error") == "ObjectStoreError", outcome
    assert outcome["exit_code"] == ObjectStoreError.exit_code == 8
    message = outcome["message"]
    assert uri in message and "\n" not in message and len(message) < 400, message
    assert outcome["seconds"] < CALL_BOUND_S, outcome


def test_short_message_drops_the_graph_stack():
    graph_error = ("{{function_node __wrapped__IteratorGetNext_output_types_1_device_/job:localhost/"
                   "replica:0/task:0/device:CPU:0}} : curlCode: 7, Couldn't connect to server "
                   "[Op:IteratorGetNext] name: \n" + "".join(f'  File "m{i}.py", line {i}, in f\n'
                                                              for i in range(36)))
    assert fs.short_message(graph_error) == "curlCode: 7, Couldn't connect to server"
    assert fs.short_message("x" * 1000) == "x" * 200 + "..."


def _graph_error():
    """What the Trainer's input pipeline raised when the store stopped: a TensorFlow op error
    naming no URI, the graph's Python stack in its message."""
    import tensorflow as tf
    stack = "".join(f'  File "/venv/keras/src/trainer.py", line {i}, in fit\n' for i in range(36))
    return tf.errors.UnknownError(None, None, "{{function_node __wrapped__IteratorGetNext}} : "
                                  "curlCode: 7, Couldn't connect to server [Op:IteratorGetNext]\n"
                                  "Detected at node IteratorGetNext defined at (most recent call "
                                  "last):\n" + stack)


def test_a_stage_failing_on_a_lost_store_is_exit_8_naming_the_uri(tmp_path, monkeypatch, capsys):
    """The store answered at run start (check_places passed) and stopped during a stage."""
    for name, value in stopped_store_env(closed_endpoint()).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(local, "check_places", lambda paths: check_home(paths.home))

    def stage_fails(config, paths, plan):
        raise RuntimeError("Trainer failed") from _graph_error()
    monkeypatch.setattr(local, "run_local", stage_fails)
    root = "s3://bigtrain-lost/root"
    code = cli.main(["run", "--home", str(tmp_path / "home"), "--set",
                     f"orchestrator.pipeline_root={root}"])
    err = capsys.readouterr().err
    assert code == 8, err
    lines = [line for line in err.splitlines() if line.startswith("bigtrain:")]
    assert len(lines) == 1 and root in lines[0] and "curlCode: 7" in lines[0], err
    assert "File " not in err and "Traceback" not in err, err   # no stack without -v


def test_object_store_cause_prefers_the_named_error_in_the_chain():
    named = ObjectStoreError("open s3://b/x failed: UnknownError: curlCode: 7")
    try:
        try:
            raise named
        except ObjectStoreError as err:
            raise RuntimeError("stage failed") from err
    except RuntimeError as wrapper:
        assert local.object_store_cause(wrapper, []) is named
    beam = RuntimeError("Pipeline failed: ObjectStoreError: put s3://b/y failed: refused\n trace")
    assert str(local.object_store_cause(beam, [])) == "put s3://b/y failed: refused"
    assert local.object_store_cause(ValueError("a bug"), []) is None


@contextlib.contextmanager
def silent_endpoint(lifetime_s: float):
    """http://127.0.0.1:<port> of a loopback server that accepts connections and never answers;
    it closes them all and stops itself after lifetime_s (or when the block ends). Yields
    (endpoint, the monotonic times of its accepts)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted, held, stop = [], [], threading.Event()

    def serve():
        deadline = time.monotonic() + lifetime_s
        while not stop.is_set() and time.monotonic() < deadline:
            if select.select([server], [], [], 0.1)[0]:
                held.append(server.accept()[0])
                accepted.append(time.monotonic())
        for conn in held:
            conn.close()
        server.close()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join()


# Past the configured bound: the end of the run after the bucket check gave up (the error's way
# up, the refused run's clean-up). The server stops itself after SILENT_LIFETIME_S: a client that
# ignored the settings (boto3's 60 s read timeout before) ends then, far past the bound + slack.
SLACK_S, SILENT_LIFETIME_S = 5, 25


def test_an_endpoint_that_never_answers_stops_the_run_within_the_configured_bound(
        tmp_path, monkeypatch, capsys):
    """S3_REQUEST_TIMEOUT_MSEC and AWS_MAX_ATTEMPTS bound it (docs/operations.md, object storage;
    s3_bounds.s3_unanswered_bound_s): here 2 attempts of 1.5 s. Timed from the endpoint's first
    accept, so the run's imports do not count. Before: boto3's read timeout was fixed at 60 s,
    whatever the settings: 3 x 60 s, about 3 min against such an endpoint."""
    from components.common.errors import EXIT_OBJECT_STORE
    from components.storage.s3_bounds import s3_unanswered_bound_s
    with silent_endpoint(SILENT_LIFETIME_S) as (endpoint, accepted):
        for name in fs.S3_CLIENT_DEFAULTS:
            monkeypatch.delenv(name, raising=False)
        for name, value in stopped_store_env(endpoint).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("S3_REQUEST_TIMEOUT_MSEC", "1500")
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
        bound = s3_unanswered_bound_s()
        assert bound == 2 * 1.5 + 1
        code = cli.main(["run", "--home", str(tmp_path / "home"),
                         "--set", "data.input=s3://silent-bucket/corpus"])
        elapsed = time.monotonic() - accepted[0]
    err = capsys.readouterr().err
    assert code == EXIT_OBJECT_STORE and "s3://silent-bucket/corpus" in err, err
    assert "Read timeout" in err, err
    assert 2 * 1.5 - 0.2 <= elapsed <= bound + SLACK_S, (elapsed, bound)
    assert not (tmp_path / "home").exists()   # refused: the home it created is removed


def test_a_bad_s3_timeout_setting_names_the_variable(monkeypatch):
    from components.config import ConfigError
    from components.storage.s3_bounds import s3_timeouts
    monkeypatch.setenv("S3_REQUEST_TIMEOUT_MSEC", "1.5s")
    with pytest.raises(ConfigError, match=r"S3_REQUEST_TIMEOUT_MSEC='1.5s': expected a whole number"):
        s3_timeouts()
