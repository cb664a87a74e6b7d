"""An object store that stops answering (a closed loopback port: what a stopped S3 server looks
like) is ObjectStoreError (exit 8) naming the URI, in one short line, within a bound, from every
fs call and from a run whose stage failed on it.

Catches: tensorflow-io's "does not exist" for an unreachable endpoint believed (exists() False,
listdir() [], a read's FileNotFoundError: a lost store read as an empty one); the AWS SDK's
default retry mode (10 attempts, about 51 s per call, AWS_MAX_ATTEMPTS ignored); TensorFlow's
graph stack inside the message; a stage failure on a lost store reported as exit 1."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from components.common import fs
from components.common.errors import ObjectStoreError
from runners import cli, local
from runners.home import check_home

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
    from components.common import fs
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
