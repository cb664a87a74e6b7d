"""`bigtrain run` against the S3 server with bad object-store settings (issue 18, bad input):
a named error naming the URI, exit code 8 (ObjectStoreError), quickly, before any stage starts.
Fast: the bucket is checked with one bounded boto3 request at run start (runners/local.py).

Catches: a run that starts the pipeline and fails mid-way (or writes a local `s3:` folder) when
the bucket is missing, a missing-credentials failure reported without the URI or as a generic
failure (exit 1), and an unbounded retry (the time limit)."""

import os
import time

from components.common.errors import ObjectStoreError
from runners import cli
from tests.support.objectstore import use_objectstore


def _run(tmp_path, capsys, *sets):
    started = time.monotonic()
    args = ["run", "--home", str(tmp_path / "home")]
    for value in sets:
        args += ["--set", value]
    code = cli.main(args)
    return code, capsys.readouterr(), time.monotonic() - started


def test_missing_bucket_at_run_start(tmp_path, capsys, monkeypatch):
    prefix = use_objectstore(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, out, seconds = _run(tmp_path, capsys, "orchestrator.pipeline_root=s3://no-such-bucket-bigtrain/root",
                              f"orchestrator.serving_dir={prefix}/serving")
    assert code == ObjectStoreError.exit_code == 8
    assert "s3://no-such-bucket-bigtrain/root" in out.err and "no such bucket" in out.err
    assert seconds < 30
    assert not os.path.exists(tmp_path / "s3:") and not os.path.exists(tmp_path / "home" / "runs")


def test_missing_credentials_at_run_start(tmp_path, capsys, monkeypatch):
    prefix = use_objectstore(monkeypatch)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, out, seconds = _run(tmp_path, capsys, f"orchestrator.pipeline_root={prefix}/root")
    assert code == 8
    assert f"{prefix}/root" in out.err and "credentials" in out.err.lower(), out.err
    assert seconds < 30


def test_missing_input_bucket_at_run_start(tmp_path, capsys, monkeypatch):
    use_objectstore(monkeypatch)
    code, out, seconds = _run(tmp_path, capsys, "data.input=s3://no-such-bucket-bigtrain/corpus")
    assert code == 8 and "s3://no-such-bucket-bigtrain/corpus" in out.err, out.err
    assert seconds < 30
