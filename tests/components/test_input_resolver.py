"""One input resolver (components/storage/listing.py resolve_files, issue 57): the same pattern
lists the same files whether it is data.input, a data.sources entry, an eval.sets input, a
data.decontaminate.eval_files entry or what the held-out fingerprint digests; on a local disk and
on the S3 server alike (recursive `**`, a folder, a plain glob, one file, an object-store prefix).

Catches: an eval set or decontamination entry listed by Python's glob without recursive=True
(`<folder>/**/*.jsonl` found 1 file there, 3 as data.input), the held-out fingerprint blind to a
file only `**` reaches, and an object store matched by Beam's own glob rule (its `**` needs at
least one folder: a top-level file missing)."""

import os

import pytest

from components.storage import fs, listing
from components.config import build_config
from components.corpus import contamination
from components.evaluation import held_out_sets
from tests.support.objectstore import use_objectstore

# The tree of the issue, plus names every rule must leave out: hidden files and folders.
FILES = ("a.jsonl", "sub/c.jsonl", "sub/deeper/b.jsonl", "sub/notes.txt", ".hidden.jsonl",
         "sub/.cache/x.jsonl")
# pattern (relative to the folder) -> the relative paths the one rule lists
PATTERNS = {
    "**/*.jsonl": ["a.jsonl", "sub/c.jsonl", "sub/deeper/b.jsonl"],
    "": ["a.jsonl", "sub/c.jsonl", "sub/deeper/b.jsonl", "sub/notes.txt"],   # the folder itself
    "*.jsonl": ["a.jsonl"],
    "sub/*": ["sub/c.jsonl", "sub/notes.txt"],
    "sub/c.jsonl": ["sub/c.jsonl"],
    "s?b/**": ["sub/c.jsonl", "sub/deeper/b.jsonl", "sub/notes.txt"],
}


def document(relative: str) -> bytes:
    return (b'{"text": "a document of %s"}\n' % relative.encode()) if relative.endswith(
        ".jsonl") else b"a document\n"


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "sets"
    for relative in FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(document(relative))
    return str(root)


def every_caller(pattern: str) -> dict[str, list[str]]:
    """{caller: the files it lists for pattern}, each through its own config path."""
    quoted = pattern.replace("'", "''")
    one = build_config("tiny", overrides=[f"data.input='{quoted}'", "data.exclude=[]",
                                          f"eval.sets=[{{name: s, input: '{quoted}'}}]"])
    mixture = build_config("tiny", overrides=[
        f"data.sources=[{{name: a, input: '{quoted}', exclude: []}}]", "eval.sets=[]"])
    return {
        "data.input": [p for _, p in listing.list_sources(one.data)[0][2]],
        "data.sources": [p for _, p in listing.list_sources(mixture.data)[0][2]],
        "eval.sets": held_out_sets.set_files(one.eval.sets[0]),
        "data.decontaminate.eval_files": list(contamination.resolve_eval_sets(
            one.data.decontaminate.eval_files)[0][1]),
        "eval_set_files (the data stage's fingerprint)": [
            p for _, p in listing.eval_set_files(one.data)],
    }


def join(root: str, relative: str) -> str:
    return f"{root}/{relative}" if relative else root


@pytest.mark.parametrize("relative", list(PATTERNS))
def test_every_caller_lists_the_same_files_locally(folder, relative):
    expected = [os.path.join(folder, p) for p in PATTERNS[relative]]
    for caller, files in every_caller(join(folder, relative)).items():
        assert files == expected, caller


def test_the_held_out_fingerprint_sees_a_file_only_a_recursive_pattern_reaches(folder):
    config = build_config("tiny", overrides=[f"eval.sets=[{{name: s, input: '{folder}/**/*.jsonl'}}]"])
    before = held_out_sets.sets_fingerprint(config.eval)
    with open(os.path.join(folder, "sub", "deeper", "b.jsonl"), "ab") as fh:
        fh.write(b'{"text": "one more"}\n')
    assert held_out_sets.sets_fingerprint(config.eval) != before


@pytest.mark.parametrize("relative", list(PATTERNS))
def test_object_store_names_match_by_the_local_rule(relative):
    """remote_matches (what an s3:// or gs:// listing is filtered by) against the local listing
    of the same tree: no service needed."""
    pattern = relative or "**/*"    # a folder: the rule's <folder>/**/*
    assert [p for p in sorted(FILES) if listing.remote_matches(p, pattern)] == PATTERNS[relative]


@pytest.mark.slow   # 30 listings at ~0.5 CPU-s each (a boto3 client per bucket check): ~10 CPU-s
def test_every_caller_lists_the_same_files_on_the_object_store(monkeypatch):
    prefix = use_objectstore(monkeypatch) + "/sets"
    for relative in FILES:
        fs.s3_put(f"{prefix}/{relative}", document(relative))
    for relative, names in PATTERNS.items():
        expected = [f"{prefix}/{p}" for p in names]
        for caller, files in every_caller(join(prefix, relative)).items():
            assert files == expected, (relative, caller)
