"""Data stage: streamed quarantine manifest, CRLF rule, code in the cache key (issue 20, item 7)."""

import json
import os
import tracemalloc

import pytest

from components.common.digest import code_digest
from components.config import DataConfig
from components.corpus import readers
from components.corpus.documents import Document
from components.text_example_gen import component, shards, transforms
from tests.support.data_stage import reader_config

BAD_LINES = 100_000


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_quarantine_manifest_is_streamed_not_held(tmp_path):
    """Fails before the fix: ConvertUnitFn kept every manifest line of a unit in a list until the
    unit ended (100k bad JSON lines of 2 bytes: ~20 MB of Python strings for a 200 KB input;
    the issue measured 490 MB RSS for 2 MB). Now each record is written as it comes."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"{\n" * BAD_LINES)
    config = reader_config(format="jsonl", document="record")
    unit, = readers.plan_units([("bad.jsonl", str(path))], config)
    os.makedirs(tmp_path / "out" / shards.PIECES_DIR)
    fn = transforms.ConvertUnitFn(config, str(tmp_path / "out"), seq_len=64, eval_fraction=0.3,
                                  split_salt="", num_shards={"train": 1, "eval": 1})
    fn.setup()
    tracemalloc.start()
    try:
        out = list(fn.process(unit))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (_, manifest_path), = [value for key, value in out if key[0] == "manifest"]
    with open(manifest_path, encoding="utf-8") as fh:
        lines = fh.readlines()
    assert len(lines) == BAD_LINES and json.loads(lines[-1])["reason"] == "invalid_json"
    assert peak < 6 * 2**20, f"peak {peak / 2**20:.1f} MiB"


def _documents(path, config):
    texts = []
    for unit in readers.plan_units([(os.path.basename(path), str(path))], config):
        for piece in unit.pieces:
            texts += [e.text for e in readers.read_piece(piece, config) if isinstance(e, Document)]
    return texts


@pytest.mark.parametrize("range_bytes", [10**7, 64])
def test_crlf_files_split_and_lose_their_carriage_returns(tmp_path, range_bytes):
    """Fails before the fix: the "\\n\\n" separator never occurs in a CRLF file (one document) and
    record mode kept each line's \\r. data.newline=keep gives the old bytes-as-they-are rule."""
    paragraphs = [f"paragraph {i}\r\nsecond line {i}".encode() for i in range(20)]
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"\r\n\r\n".join(paragraphs) + b"\r\n")
    by_separator = reader_config(document="separator", separator=b"\n\n", range_bytes=range_bytes)
    expected = [p.replace(b"\r\n", b"\n") for p in paragraphs]
    expected[-1] += b"\n"
    assert _documents(path, by_separator) == expected
    by_record = reader_config(document="record", range_bytes=range_bytes)
    lines = [line for p in paragraphs for line in p.split(b"\r\n")]
    assert _documents(path, by_record) == lines
    kept = by_separator._replace(newline="keep")
    assert len(_documents(path, kept)) == 1          # "\n\n" never occurs: one document
    assert all(b"\r" in text for text in _documents(path, by_record._replace(newline="keep")))


def test_data_stage_code_is_in_its_cache_key_for_the_byte_tokenizer(tmp_path):
    """Fails before the fix: code_digest was None without a tokenizer (the byte default), so a
    reader fix left stale shards cached."""
    (tmp_path / "a.txt").write_text("hello\n")
    gen = component.TextExampleGen(DataConfig(input=str(tmp_path), exclude=()),
                                   input_fingerprint="f" * 64)
    assert gen.exec_properties["code_digest"] == code_digest(*component.DATA_CODE)


# Modules of the closure deliberately left out of the key (component.py says why).
NOT_IN_DATA_CODE = ("components.config",)


def test_data_code_covers_the_data_stage_import_closure():
    """Derived from the code like tests/test_layers.py: every repository module the data
    stage's executor module imports, transitively (function-level imports included), is under a
    DATA_CODE entry. Fails before the fix: `schemas` (the feature name) and
    components.common.fs (the I/O seam every read goes through) were missing, so a change
    there left stale shards cached; fails again when a new data-stage import is not added."""
    from tests.support.import_graph import imports_of, product_modules
    modules = product_modules()
    closure, stack = set(), [component.__name__]
    while stack:
        name = stack.pop()
        if name not in closure:
            closure.add(name)
            stack.extend(imports_of(modules[name], name, modules))
    assert {"schemas", "components.common.fs", "components.corpus.readers"} <= closure

    def covered(name, entries):
        return any(name == entry or name.startswith(entry + ".") for entry in entries)
    missing = sorted(m for m in closure
                     if not covered(m, component.DATA_CODE) and not covered(m, NOT_IN_DATA_CODE))
    assert missing == []
