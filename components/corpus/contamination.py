"""Decontamination: an index of the word n-grams of evaluation sets, and the sets a training
document shares an n-gram with (lm-eval's 13-gram rule; plain functions, numpy).

Normalization (both sides): ASCII lowercase; every ASCII byte that is not a letter or a digit
becomes a space; runs of spaces become one; non-ASCII bytes (UTF-8 letters) are kept as they are.
"Don't stop!" and "don t stop" are the same words. A text with fewer than n words contributes
(and is checked by) its whole normalized text as one n-gram.

Evaluation files: each entry of data.decontaminate.eval_files is one set (a glob). A `.jsonl` /
`.json` file (optionally `.gz`) holds one record per line, whose string values (nested ones
too) are each one text; any other file is one text. n-grams never span two texts.

Memory: one uint64 (8 bytes) per distinct evaluation n-gram, sorted, per set (a 10 MB evaluation
set has about 1.6 M words: ~13 MB); each worker builds the index once.
"""

from __future__ import annotations

import gzip
import json
from typing import Iterator, NamedTuple

import numpy as np

from components.common import fs
from components.corpus.minhash import word_ngram_hashes

_KEEP = set(b"abcdefghijklmnopqrstuvwxyz0123456789")
# ASCII lowercase letters and digits stay; other ASCII bytes -> space; bytes >= 128 stay.
_TABLE = bytes(c if c in _KEEP or c >= 128 else 32 for c in bytes(range(256)).lower())


def normalized(text: bytes) -> bytes:
    return b" ".join(text.lower().translate(_TABLE).split())


def ngram_hashes(text: bytes, n: int) -> np.ndarray:
    """The distinct 64-bit hashes of a text's normalized word n-grams, sorted."""
    return np.unique(word_ngram_hashes(normalized(text), n))


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def eval_texts(path: str) -> Iterator[bytes]:
    """The texts of one evaluation file (see the module docstring)."""
    data = fs.read_bytes(path)
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    name = path[:-3] if path.endswith(".gz") else path
    if not name.endswith((".jsonl", ".json")):
        yield data
        return
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise ValueError(f"data.decontaminate.eval_files: {path}:{number}: not JSON ({err})") from None
        for text in _strings(record):
            yield text.encode("utf-8")


def resolve_eval_sets(patterns: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """((set name = its pattern, matching files sorted) ...); a pattern matching nothing is a
    named error (a typo must not turn decontamination off)."""
    sets = []
    for pattern in patterns:
        files = tuple(sorted(fs.glob(pattern)))
        if not files:
            raise FileNotFoundError(f"data.decontaminate.eval_files: {pattern!r} matches no files")
        sets.append((pattern, files))
    return tuple(sets)


class EvalIndex(NamedTuple):
    names: tuple[str, ...]
    hashes: tuple[np.ndarray, ...]  # per set: sorted distinct n-gram hashes
    n: int

    def sizes(self) -> dict[str, int]:
        return {name: len(h) for name, h in zip(self.names, self.hashes)}

    def matches(self, text: bytes) -> tuple[str, ...]:
        """The sets sharing at least one n-gram with text (in set order)."""
        grams = ngram_hashes(text, self.n)
        found = []
        for name, index in zip(self.names, self.hashes):
            if len(index) and len(grams):
                positions = np.minimum(np.searchsorted(index, grams), len(index) - 1)
                if np.any(index[positions] == grams):
                    found.append(name)
        return tuple(found)


def index_texts(sets: dict[str, list[bytes]], n: int) -> EvalIndex:
    """The index of {set name: texts}."""
    hashes = []
    for texts in sets.values():
        parts = [ngram_hashes(t, n) for t in texts] or [np.zeros(0, dtype=np.uint64)]
        hashes.append(np.unique(np.concatenate(parts)))
    return EvalIndex(tuple(sets), tuple(hashes), n)


def build_index(eval_sets: tuple[tuple[str, tuple[str, ...]], ...], n: int) -> EvalIndex:
    """The index of resolved evaluation sets (resolve_eval_sets)."""
    return index_texts({name: [t for path in files for t in eval_texts(path)]
                        for name, files in eval_sets}, n)
