"""The data stage with its input and its output on the S3 server (`make objectstore`): the listing
(FileSystems.match), the readers (FileSystems.open) and the shard writer on s3://, byte for byte
the shards of the same corpus read and written locally.

Catches: the old glob/os.stat listing (no s3:// input at all), readers that open() a URI, a
fingerprint that reads every object's bytes, and a missing bucket reported as "no files".
"""

import os

import pytest

from components.storage import fs, listing
from components.common.errors import ObjectStoreError
from tests.support.data_stage import tree_digest
from tests.support.data_stage import run_stage
from tests.support.objectstore import record_s3_attempts, use_objectstore


def upload(local_root: str, prefix: str) -> None:
    for d, _, names in os.walk(local_root):
        for n in names:
            path = os.path.join(d, n)
            if os.path.isfile(path) and not os.path.islink(path):
                fs.copy(path, f"{prefix}/{os.path.relpath(path, local_root)}")


def test_bucket_check_tries_three_times_by_default(monkeypatch):
    """fs's defaults (S3_CLIENT_DEFAULTS: 3 attempts, the standard retry mode) govern boto3 as
    they govern tensorflow-io. Catches: retries set in the client's Config, which override the
    environment and count retries, not attempts ({"max_attempts": 3} made 4)."""
    use_objectstore(monkeypatch)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on port 9
    for name in fs.S3_CLIENT_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    attempts = record_s3_attempts(monkeypatch)
    with pytest.raises(ObjectStoreError, match="s3://bigtrain-test/corpus"):
        fs.check_bucket("s3://bigtrain-test/corpus")
    assert attempts == ["HEAD http://127.0.0.1:9/bigtrain-test"] * 3, attempts


@pytest.mark.slow   # runs the data-stage Beam pipeline on S3 (fast tier: docs/benchmarks.md)
def test_data_stage_on_s3_matches_the_local_run(tmp_path, monkeypatch):
    prefix = use_objectstore(monkeypatch)
    local_input = tmp_path / "corpus"
    for i in range(6):
        (local_input / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (local_input / f"d{i % 2}" / f"f{i}.txt").write_text(f"document {i}\n" * (50 + 40 * i))
    try:
        upload(str(local_input), f"{prefix}/corpus")
        root, remote_files = listing.list_input_files(f"{prefix}/corpus")
        _, local_files = listing.list_input_files(str(local_input))
        assert root == f"{prefix}/corpus"
        assert [r for r, _ in remote_files] == [r for r, _ in local_files]
        # size + last-modified from the listing, no bytes read; stable across two listings
        assert listing.input_fingerprint(remote_files) == listing.input_fingerprint(
            listing.list_input_files(f"{prefix}/corpus")[1])

        remote = run_stage(remote_files, f"{prefix}/out", train_shards=2, eval_shards=1)
        local = run_stage(local_files, str(tmp_path / "out"), train_shards=2, eval_shards=1)
        assert remote == local and remote["files_read"] == 6
        fetched = tmp_path / "fetched"
        for rel in fs.walk_files(f"{prefix}/out"):
            if not rel.startswith("."):
                os.makedirs(fetched / os.path.dirname(rel), exist_ok=True)
                fs.copy(f"{prefix}/out/{rel}", str(fetched / rel))
        expected = {k: v for k, v in tree_digest(str(tmp_path / "out")).items() if not k.startswith(".")}
        assert tree_digest(str(fetched)) == expected and expected
        assert not os.path.exists("s3:")
    finally:
        fs.rmtree(prefix)


def test_missing_bucket_input_is_a_named_error(monkeypatch):
    use_objectstore(monkeypatch)
    with pytest.raises(ObjectStoreError, match="s3://no-such-bucket-bigtrain/corpus"):
        listing.list_input_files("s3://no-such-bucket-bigtrain/corpus")


def test_unreachable_endpoint_is_a_named_error_and_bounded(monkeypatch):
    """Bounded: the listing's one request is tried AWS_MAX_ATTEMPTS times, not more (counted,
    not timed: a retry loop of its own would show as more attempts)."""
    use_objectstore(monkeypatch)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on port 9
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    attempts = record_s3_attempts(monkeypatch)
    with pytest.raises(ObjectStoreError, match="s3://bigtrain-test/corpus"):
        listing.list_input_files("s3://bigtrain-test/corpus")
    assert len(attempts) == 2, attempts


@pytest.mark.slow   # runs the data-stage Beam pipeline on S3 (fast tier: docs/benchmarks.md)
def test_object_deleted_between_listing_and_reading_is_quarantined(tmp_path, monkeypatch):
    """An input object deleted after the listing and before its read (another writer, a
    lifecycle rule) is a counted quarantine, not a failed stage and not a silent loss: the file
    is counted under files_skipped_unreadable and the manifest names it (relative path, and the
    URI in the store's error); the accounting (listed = read + quarantined) holds. The decision: one vanished object
    in a terabyte must not fail hours of conversion; the manifest and counters show it.
    Catches: a reader that lets the store's 404 escape (the stage fails) or drops the file
    without counting it (check_accounting would then fail the stage)."""
    import json
    from components.text_example_gen.component import check_accounting
    from components.text_example_gen.transforms import QUARANTINE_MANIFEST
    prefix = use_objectstore(monkeypatch)
    local_input = tmp_path / "corpus"
    local_input.mkdir()
    for i in range(8):
        (local_input / f"f{i}.txt").write_text(f"document {i}\n" * 200)
    try:
        upload(str(local_input), f"{prefix}/corpus")
        _, files = listing.list_input_files(f"{prefix}/corpus")
        gone = f"{prefix}/corpus/f2.txt"
        fs.remove(gone)  # the hook: between the listing and the read
        counters = run_stage(files, f"{prefix}/out", train_shards=1, eval_shards=1, eval_fraction=0.5)
        assert counters["files_seen"] == 8 and counters["files_read"] == 7
        assert counters["files_skipped_unreadable"] == 1
        manifest = [json.loads(line) for line in
                    fs.read_text(f"{prefix}/out/{QUARANTINE_MANIFEST}").splitlines() if line]
        assert [(e["path"], e["reason"]) for e in manifest] == [("f2.txt", "unreadable")], manifest
        assert gone in manifest[0]["detail"] and "Not found" in manifest[0]["detail"]
        check_accounting(counters, len(files), f"{prefix}/out/{QUARANTINE_MANIFEST}")
    finally:
        fs.rmtree(prefix)
