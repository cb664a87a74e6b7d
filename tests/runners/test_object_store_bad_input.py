"""`bigtrain run` against the S3 server with bad object-store settings (issue 18, bad input):
a named error naming the URI, exit code 8 (ObjectStoreError), before any stage starts, after a
bounded number of requests: each bucket is checked with one boto3 HEAD at run start
(runners/local/run.py), which a 404 or missing credentials does not retry.

Catches: a run that starts the pipeline and fails mid-way (or writes a local `s3:` folder) when
the bucket is missing, a missing-credentials failure reported without the URI or as a generic
failure (exit 1), and a check that retries or polls (the count of HTTP attempts; a wall-time
limit here once failed on a cold TensorFlow import under CI's load, 51.7 s, CI of 2026-11-28)."""

import os

from components.common.errors import ObjectStoreError
from runners.cli import app as cli
from tests.support.objectstore import record_s3_attempts, use_objectstore

# HTTP attempts a run may make before it refuses: one HEAD per place it checks (the pipeline
# root, the serving folder, the input), none repeated.
MOST_ATTEMPTS = 3


def _run(tmp_path, capsys, monkeypatch, *sets):
    """(exit code, captured output, every boto3 HTTP attempt made) of `bigtrain run`."""
    attempts = record_s3_attempts(monkeypatch)
    args = ["run", "--home", str(tmp_path / "home")]
    for value in sets:
        args += ["--set", value]
    code = cli.main(args)
    return code, capsys.readouterr(), attempts


def _no_stage_started(tmp_path):
    return not os.path.exists(tmp_path / "s3:") and not os.path.exists(tmp_path / "home" / "runs")


def test_missing_bucket_at_run_start(tmp_path, capsys, monkeypatch):
    prefix = use_objectstore(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, out, attempts = _run(tmp_path, capsys, monkeypatch,
                               "orchestrator.pipeline_root=s3://no-such-bucket-bigtrain/root",
                               f"orchestrator.serving_dir={prefix}/serving")
    assert code == ObjectStoreError.exit_code == 8
    assert "s3://no-such-bucket-bigtrain/root" in out.err and "no such bucket" in out.err
    assert 1 <= len(attempts) <= MOST_ATTEMPTS and len(set(attempts)) == len(attempts), attempts
    assert _no_stage_started(tmp_path)


def test_missing_credentials_at_run_start(tmp_path, capsys, monkeypatch):
    prefix = use_objectstore(monkeypatch)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, out, attempts = _run(tmp_path, capsys, monkeypatch, f"orchestrator.pipeline_root={prefix}/root")
    assert code == 8
    assert f"{prefix}/root" in out.err and "credentials" in out.err.lower(), out.err
    assert attempts == []   # boto3 refuses to sign before it sends anything
    assert _no_stage_started(tmp_path)


def test_missing_input_bucket_at_run_start(tmp_path, capsys, monkeypatch):
    use_objectstore(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, out, attempts = _run(tmp_path, capsys, monkeypatch, "data.input=s3://no-such-bucket-bigtrain/corpus")
    assert code == 8 and "s3://no-such-bucket-bigtrain/corpus" in out.err, out.err
    assert 1 <= len(attempts) <= MOST_ATTEMPTS and len(set(attempts)) == len(attempts), attempts
    assert _no_stage_started(tmp_path)
