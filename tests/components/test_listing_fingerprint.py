"""The input fingerprint comes from listing metadata (relative path, size, mtime), never from the
bytes: the rule documented in docs/operations.md ("Input fingerprint"). Fast, no TensorFlow.

Catches: a fingerprint that reads every file (open() is made to fail here), one that ignores an
added/removed/resized/re-written file, and one that depends on where the corpus lives (absolute
paths)."""

import builtins
import os
import shutil

import pytest

from components.storage import listing


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


def _loop_corpus(root):
    """DIR/a.py, DIR/sub/b.py, DIR/sub/.hidden.py and a link back up: DIR/sub/parent -> .."""
    os.makedirs(os.path.join(root, "sub"))
    for name in ("a.py", os.path.join("sub", "b.py"), os.path.join("sub", ".hidden.py")):
        with open(os.path.join(root, name), "w") as fh:
            fh.write("x = 1\n")
    os.symlink("..", os.path.join(root, "sub", "parent"))


@pytest.mark.parametrize("spec", ["{root}/**/*.py", "{root}", "{root}/**"])
def test_a_directory_link_loop_is_followed_once(tmp_path, spec):
    """glob(recursive=True) follows DIR/sub/parent -> .. again and again (each file listed once
    per lap, and with two such links the laps multiply): the listing enters each directory (by
    device and inode) once, so each file is listed once, under its shortest path."""
    root = str(tmp_path / "DIR")
    _loop_corpus(root)
    _, files = listing.list_input_files(spec.format(root=root))
    assert [relative for relative, _ in files] == ["a.py", os.path.join("sub", "b.py")]


def test_a_link_loop_listing_reads_each_directory_once(tmp_path, monkeypatch):
    """Bounded: two links up from one folder (2 ** depth paths for glob) cost two directory reads
    per real directory (the walk and the name match); counted, not timed."""
    root = str(tmp_path / "DIR")
    _loop_corpus(root)
    os.symlink("..", os.path.join(root, "sub", "parent2"))
    reads = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: reads.append(path) or real_listdir(path))
    _, files = listing.list_input_files(os.path.join(root, "**", "*.py"))
    assert len(files) == 2
    assert sorted(os.path.relpath(r, root) for r in reads) == [".", ".", "sub", "sub"]


def test_a_link_to_another_folder_is_listed_through_the_link(tmp_path):
    """Following links stays: a linked folder outside the input is part of it (once)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c.py").write_text("y = 2\n")
    root = str(tmp_path / "DIR")
    _loop_corpus(root)
    os.symlink(str(outside), os.path.join(root, "linked"))
    _, files = listing.list_input_files(root)
    assert [relative for relative, _ in files] == ["a.py", os.path.join("linked", "c.py"),
                                                    os.path.join("sub", "b.py")]
