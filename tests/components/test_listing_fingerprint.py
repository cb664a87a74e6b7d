"""The input fingerprint comes from listing metadata (relative path, size, mtime), never from the
bytes: the rule documented in docs/operations.md ("Input fingerprint"). Fast, no TensorFlow.

Catches: a fingerprint that reads every file (open() is made to fail here), one that ignores an
added/removed/resized/re-written file, and one that depends on where the corpus lives (absolute
paths)."""

import builtins
import os
import shutil

import pytest

from components.common import listing


def _corpus(root):
    os.makedirs(os.path.join(root, "d"), exist_ok=True)
    for i in range(3):
        with open(os.path.join(root, "d", f"f{i}.txt"), "w") as fh:
            fh.write(f"file {i}\n" * 10)
        os.utime(os.path.join(root, "d", f"f{i}.txt"), ns=(10**18, 10**18 + i))


def fingerprint(root):
    return listing.input_fingerprint(listing.list_input_files(root)[1])


def test_fingerprint_reads_no_bytes(tmp_path, monkeypatch):
    _corpus(str(tmp_path / "c"))
    expected = fingerprint(str(tmp_path / "c"))

    def no_open(*args, **kwargs):
        raise AssertionError(f"the fingerprint opened {args[0]}")
    monkeypatch.setattr(builtins, "open", no_open)
    assert fingerprint(str(tmp_path / "c")) == expected


def test_fingerprint_rule_size_and_mtime(tmp_path):
    root = str(tmp_path / "c")
    _corpus(root)
    before = fingerprint(root)
    path = os.path.join(root, "d", "f1.txt")
    # The same corpus elsewhere, with the same metadata: the same fingerprint.
    shutil.copytree(root, str(tmp_path / "copy"), copy_function=shutil.copy2)
    assert fingerprint(str(tmp_path / "copy")) == before
    # Touching (a new mtime) changes it: the data stage re-runs (and writes identical shards).
    os.utime(path, ns=(10**18, 10**18 + 99))
    assert fingerprint(root) != before
    os.utime(path, ns=(10**18, 10**18 + 1))
    assert fingerprint(root) == before
    # Re-writing one byte (new mtime) or resizing changes it.
    with open(path, "r+") as fh:
        fh.write("F")
    assert fingerprint(root) != before
    with open(path, "a") as fh:
        fh.write("more")
    os.utime(path, ns=(10**18, 10**18 + 1))
    assert fingerprint(root) != before  # same mtime, other size
    # Adding or removing a file changes it.
    _corpus(root)
    assert fingerprint(root) == before
    with open(os.path.join(root, "d", "new.txt"), "w") as fh:
        fh.write("x")
    assert fingerprint(root) != before


def test_signature_adds_the_input_spec(tmp_path):
    from components.config import build_config
    _corpus(str(tmp_path / "c"))
    config = build_config("tiny", overrides=[f"data.input={tmp_path / 'c'}"])
    value = listing.fingerprint_input(config.data)
    assert listing.input_signature(config.data, value) != listing.input_signature(config.data, "0" * 64)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_fingerprinted_without_opening_it(tmp_path):
    _corpus(str(tmp_path / "c"))
    os.mkfifo(str(tmp_path / "c" / "pipe"))
    assert len(fingerprint(str(tmp_path / "c"))) == 64  # would block forever if opened
