"""Push on the S3 server (`make objectstore`) and concurrent pushes, locally and on S3.

Catches: push writing a local `./s3:` folder (the old os/shutil push), a version visible before
saved_model.pb is complete, two concurrent pushes of one model giving two versions (the old
behaviour: both saw no served digest, both published), a failed push leaving its claim behind.
"""

import os
import threading

import pytest

from components.storage import fs
from components.push import layout, push, staging
from tests.support.saved_models import fake_saved_model
from tests.support.objectstore import use_objectstore


def concurrent_pushes(source: str, base: str, n: int) -> list[push.PushResult]:
    results, errors = [None] * n, []
    start = threading.Barrier(n)

    def one(i):
        start.wait()
        try:
            results[i] = push.push_model(source, base)
        except BaseException as err:  # re-raised below with the test's assertion
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_concurrent_pushes_of_one_model_give_one_version_locally(tmp_path):
    fake_saved_model(tmp_path / "m", b"one model" * 1000)
    base = str(tmp_path / "serving" / "gpt")
    results = concurrent_pushes(str(tmp_path / "m"), base, 4)
    assert sum(r.pushed for r in results) == 1
    assert len({r.version for r in results}) == 1
    assert layout.served_versions(base) == [results[0].version]


def test_a_local_claim_is_never_visible_before_its_bytes(tmp_path, monkeypatch):
    """The CI failure of 2026-11-23 (3 of 4 racing pushes published): a loser read the winner's
    claim between O_EXCL create and write, found it empty, judged it stale and took it over. Here
    the winner's write is held open while another pusher looks at the claim."""
    path = str(tmp_path / "claim.json")
    real_open, seen = open, []

    def open_then_peek(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if "w" in mode and os.path.dirname(str(file)) == str(tmp_path):
            seen.append(os.path.exists(path) and real_open(path, "rb").read())
        return handle

    monkeypatch.setattr("builtins.open", open_then_peek)
    assert fs.create_exclusive(path, b'{"pid": 1}')
    monkeypatch.setattr("builtins.open", real_open)
    assert seen == [False]  # nothing at the claim's name until it holds every byte
    assert open(path, "rb").read() == b'{"pid": 1}'
    assert not fs.create_exclusive(path, b"other")
    assert os.listdir(tmp_path) == ["claim.json"]  # no private file left behind


@pytest.fixture
def s3_prefix(monkeypatch):
    prefix = use_objectstore(monkeypatch)
    yield prefix
    fs.rmtree(prefix)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_push_to_s3_is_idempotent_and_leaves_no_local_folder(tmp_path, s3_prefix, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fake_saved_model(tmp_path / "a", b"model a")
    fake_saved_model(tmp_path / "b", b"model b")
    base = f"{s3_prefix}/serving/gpt"
    first = push.push_model(str(tmp_path / "a"), base, record={"model_id": 1})
    assert first.pushed and first.path == f"{base}/{first.version}"
    assert fs.read_bytes(f"{first.path}/saved_model.pb") == b"model a"
    assert fs.read_bytes(f"{first.path}/variables/variables.data-00000-of-00001") == b"model a" * 100
    assert push.model_digest(first.path) == push.model_digest(str(tmp_path / "a"))
    again = push.push_model(str(tmp_path / "a"), base)
    assert not again.pushed and again.version == first.version
    second = push.push_model(str(tmp_path / "b"), base)
    assert second.pushed and second.version > first.version
    assert layout.served_versions(base) == [first.version, second.version]
    assert not os.path.exists(tmp_path / "s3:")  # the old push wrote ./s3:/bucket/...
    # an s3:// source (the Model artifact in a bucket) pushes too
    other = push.push_model(second.path, f"{s3_prefix}/serving/copy")
    assert other.pushed and fs.read_bytes(f"{other.path}/saved_model.pb") == b"model b"


def test_s3_version_without_its_graph_is_not_served(s3_prefix, tmp_path, monkeypatch):
    """Everything but saved_model.pb written (a push killed before the last object): no version."""
    fake_saved_model(tmp_path / "a", b"model a")
    base = f"{s3_prefix}/serving/gpt"
    monkeypatch.setattr(fs, "copy", _fail_on_graph(fs.copy))
    with pytest.raises(OSError, match="injected"):
        push.push_model(str(tmp_path / "a"), base)
    assert layout.served_versions(base) == []
    assert not fs.exists(f"{base}/{staging.CLAIMS_DIR}/{push.model_digest(str(tmp_path / 'a'))}.json")
    monkeypatch.undo()
    use_objectstore(monkeypatch)
    assert push.push_model(str(tmp_path / "a"), base).pushed  # the claim was let go


def _fail_on_graph(copy):
    def wrapped(source, destination, overwrite=True):
        if destination.endswith("/saved_model.pb"):
            raise OSError("injected failure before the graph")
        return copy(source, destination, overwrite)
    return wrapped


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_concurrent_pushes_of_one_model_give_one_version_on_s3(tmp_path, s3_prefix):
    fake_saved_model(tmp_path / "m", b"one model" * 1000)
    base = f"{s3_prefix}/serving/gpt"
    results = concurrent_pushes(str(tmp_path / "m"), base, 3)
    assert sum(r.pushed for r in results) == 1
    assert len({r.version for r in results}) == 1
    assert layout.served_versions(base) == [results[0].version]


def test_missing_bucket_is_a_named_error(tmp_path, monkeypatch):
    from components.common.errors import EXIT_OBJECT_STORE, ObjectStoreError
    use_objectstore(monkeypatch)
    fake_saved_model(tmp_path / "a", b"model a")
    with pytest.raises(ObjectStoreError, match="s3://no-such-bucket-bigtrain/serving") as err:
        push.push_model(str(tmp_path / "a"), "s3://no-such-bucket-bigtrain/serving/gpt")
    assert err.value.exit_code == EXIT_OBJECT_STORE
