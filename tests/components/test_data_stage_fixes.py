"""Data stage: streamed quarantine manifest, CRLF rule, code in the cache key (issue 20, item 7)."""

import json
import os
import tracemalloc

import pytest

from components.config import Config, DataConfig
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
    gen = component.TextExampleGen(Config(data=DataConfig(input=str(tmp_path), exclude=())),
                                   input_fingerprint="f" * 64)
    assert gen.exec_properties["code_digest"] == component.data_code_digest()


def _write(root, files: dict) -> None:
    """files: {module name: source}; a package's name stands for its __init__.py."""
    for module, text in files.items():
        parts = module.split(".")
        is_package = any(other.startswith(module + ".") for other in files)
        path = root.joinpath(*parts, "__init__.py") if is_package else root.joinpath(*parts[:-1], parts[-1] + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_stages_code_is_its_import_closure(tmp_path):
    """import_closure (components/storage/digest.py), which every stage's code digest uses, on a
    small tree whose closure is worked out by hand: module-level, function-level, relative and
    `from package import module` imports are followed, with the parent packages Python runs
    first; third-party imports, modules nothing imports and a left-out package are not in it."""
    from components.storage.digest import closure_digest, import_closure
    _write(tmp_path, {
        "components": "", "components.stage": "",
        "components.stage.entry": "import os\nfrom . import rules\n"
                                  "def run():\n    from components.shared import fs\n",
        "components.stage.rules": "from components.config import tree\nimport schemas\n",
        "components.stage.unused": "", "components.shared": "", "components.shared.fs": "import json\n",
        "components.config": "", "components.config.tree": "",
        "schemas": "", "schemas.x": "", "pipeline": "import components.stage.entry\n", "pipeline.y": ""})
    by_hand = ["components", "components.shared", "components.shared.fs", "components.stage",
               "components.stage.entry", "components.stage.rules", "schemas"]
    assert import_closure("components.stage.entry", leave_out=("components.config",),
                          root=str(tmp_path)) == by_hand
    assert "components.config.tree" in import_closure("components.stage.entry", root=str(tmp_path))
    before = closure_digest("components.stage.entry", root=str(tmp_path))
    tmp_path.joinpath("components", "stage", "unused.py").write_text("x = 1\n")
    assert closure_digest("components.stage.entry", root=str(tmp_path)) == before
    tmp_path.joinpath("components", "shared", "fs.py").write_text("import json  # an edit\n")
    assert closure_digest("components.stage.entry", root=str(tmp_path)) != before


def test_the_data_stage_code_digest_covers_the_feature_name_and_the_io_seam():
    """Fails before issue 39's fix: `schemas` (the feature name) and components.storage.fs (the
    I/O seam every read goes through) were missing from the hand list, so a change there left
    stale shards cached. The settings' package is left out (component.py says why)."""
    from components.storage.digest import import_closure
    closure = import_closure(component.DATA_ENTRY, leave_out=component.DATA_LEAVE_OUT)
    assert {"schemas", "components.storage.fs", "components.corpus.readers",
            "components.tokenizer.byte_level"} <= set(closure)
    assert not [m for m in closure if m.startswith("components.config")]
