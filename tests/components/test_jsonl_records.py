"""A JSONL record is read by orjson first and by the json module where orjson fails or finds no
string field; both ways give the same Document or the same quarantine record (reason and
detail), whatever the line holds."""

from __future__ import annotations

import orjson
import pytest

from components.corpus import readers

LINES = [
    b'{"text": "plain"}', b'{"text": "caf\xc3\xa9 \\u00e9 \\ud83d\\ude00"}',
    b'{"text":"a","text":"last wins"}', b'{"\\u0074ext": "escaped key"}', b' {"text": "x"} \r',
    b'{"text": "\\u0000 nul"}', b'{"text": ""}', b'', b'   ', b'{"text": "x"} trailing',
    b'{"text": "x",}', b"{'text': 'x'}", b'{"text": "\xff"}', b'\xef\xbb\xbf{"text": "bom"}',
    b'{"text": "\\ud800 lone surrogate"}', b'{"text": "\xed\xa0\x80"}',
    b'{"text": "x", "n": NaN}', b'{"text": "x", "f": 1e400}',
    b'{"text": 123456789012345678901234567890}',
    b'{"text": 1.5}', b'{"text": null}', b'{"text": ["a"]}', b'{"other": "x"}', b'["text"]',
    b'"text"', b'12', b'null', b'{"text": "tab\there"}', b'\x00{"text": "x"}',
]


def json_module_only(monkeypatch, line: bytes):
    def refuse(_):
        raise orjson.JSONDecodeError("forced", "", 0)
    with monkeypatch.context() as patch:
        patch.setattr(readers.orjson, "loads", refuse)
        return readers._json_record("a.jsonl@0", line, "text")


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_orjson_first_reads_as_the_json_module(monkeypatch, line):
    assert readers._json_record("a.jsonl@0", line, "text") == json_module_only(monkeypatch, line)


def test_the_fast_path_is_taken_for_a_plain_record(monkeypatch):
    """(So the comparison above compares two paths, not one.)"""
    monkeypatch.setattr(readers.json, "loads", lambda _: pytest.fail("json module used"))
    assert readers._json_record("a@0", b'{"text": "x"}', "text").text == b"x"
