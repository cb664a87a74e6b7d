"""Decontamination: an index of the word n-grams of evaluation sets, and the sets a training
document shares an n-gram with (lm-eval's 13-gram rule; plain functions, numpy).

Normalization (both sides): ASCII lowercase; every ASCII byte that is not a letter or a digit
becomes a space; runs of spaces become one; non-ASCII bytes (UTF-8 letters) are kept as they are.
"Don't stop!" and "don t stop" are the same words.

Short evaluation texts (the GPT-3 paper's contamination analysis, appendix C): a text of m words,
min_words <= m < n, is one m-word sequence, matched wherever it occurs inside a training document
(a document contains it when m of its consecutive normalized words are that text). A text of
fewer than min_words words (8 by default) is not checked: a 3-word answer occurs in ordinary
prose by chance. Such texts are counted per set (EvalIndex.too_short; the report's "eval texts
too short to check"); a text with no word at all is not a text and not counted.

Evaluation files: each entry of data.decontaminate.eval_files is one set (a glob). A `.jsonl` /
`.json` file (optionally `.gz`) holds one record per line, whose string values (nested ones
too) are each one text; any other file is one text. n-grams never span two texts.

Memory: one uint64 (8 bytes) per distinct evaluation n-gram or short text, sorted, per set (a
10 MB evaluation set has about 1.6 M words: ~13 MB), and the prefilter's anchors (at most 8
uint64 per entry, and its flag tables); each worker builds the index once. Time: a document the
exact prefilter (prefilter.py) rules out costs one translate pass and a few numpy passes over
its 8-byte words; any other is hashed once per word length the index holds (n, and each length
of a short text: at most n - min_words + 1 lengths, 6 by default), in one pass over its bytes.
The prefilter never changes a result (tests/components/test_decontamination_reference.py).
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Iterable, Iterator, NamedTuple

import numpy as np

from components.storage import fs, listing
from components.config.cleaning import EXAMPLES_PREFIX, HOME_PREFIX
from components.corpus import prefilter as prefilter_lib
from components.corpus.minhash import substring_hashes, word_bounds, word_ngram_hashes

_KEEP = set(b"abcdefghijklmnopqrstuvwxyz0123456789")
# ASCII lowercase letters and digits stay; other ASCII bytes -> space; bytes >= 128 stay.
_TABLE = bytes(c if c in _KEEP or c >= 128 else 32 for c in bytes(range(256)).lower())
_SEPARATORS = bytes(c for c in range(256) if _TABLE[c] == 32)   # the bytes that become spaces


def normalized(text: bytes) -> bytes:
    return b" ".join(text.lower().translate(_TABLE).split())


def joined(text: bytes) -> bytes:
    """The normalized text without its spaces (prefilter.py), in one pass: the bytes _TABLE
    makes spaces deleted, the others mapped (lowercased)."""
    return text.translate(_TABLE, _SEPARATORS)


def ngram_hashes(text: bytes, n: int) -> np.ndarray:
    """The distinct 64-bit hashes of a text's normalized word n-grams, sorted."""
    return np.unique(word_ngram_hashes(normalized(text), n))


def sequence_hashes(text: bytes, lengths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(hash, word length) of every run of L consecutive words of a normalized text, for each L
    in lengths the text has (one hash pass over all of them). A run's hash is the hash of its
    bytes, wherever it lies: the same as the whole-text hash of a text of exactly those words."""
    starts, ends = word_bounds(text) if text else (np.zeros(0, np.int64),) * 2
    parts = [(starts[:len(starts) - length + 1], ends[length - 1:], length)
             for length in lengths if len(starts) >= length]
    if not parts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    hashes = substring_hashes(text, np.concatenate([p[0] for p in parts]),
                              np.concatenate([p[1] for p in parts]))
    return hashes, np.concatenate([np.full(len(p[0]), p[2], dtype=np.int64) for p in parts])


def text_hashes(text: bytes, n: int, min_words: int) -> tuple[np.ndarray | None, int]:
    """What one evaluation text puts into the index, and its words: its n-gram hashes (n words
    or more), the hash of its whole normalized text (min_words to n - 1 words), or None (too
    short to check; an empty array for a text with no word)."""
    norm = normalized(text)
    words = norm.count(b" ") + 1 if norm else 0
    if words >= n:
        return word_ngram_hashes(norm, n), words
    if words == 0:
        return np.zeros(0, dtype=np.uint64), 0
    if words < min_words:
        return None, words
    return substring_hashes(norm, np.zeros(1, np.int64), np.full(1, len(norm), np.int64)), words


def record_strings(value) -> Iterator[str]:
    """Every string value of a JSON record, nested ones too, in order: each one evaluation text."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from record_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from record_strings(item)


def eval_texts(path: str, max_file_bytes: int | None = None) -> Iterator[bytes]:
    """The texts of one evaluation file (see the module docstring), read as a stream: a JSONL
    file one line at a time, any other file whole or, with max_file_bytes, its first
    max_file_bytes bytes only (a held-out set scores a document's first bytes; a 200 MB file
    must not reach memory). A truncated, corrupt or not-gzip `.gz` is a ValueError naming it."""
    try:
        yield from _file_texts(path, max_file_bytes)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:   # truncated, not gzip, corrupt
        raise ValueError(f"evaluation file {path}: cannot be read ({type(err).__name__}: "
                         f"{err})") from None


def _file_texts(path: str, max_file_bytes: int | None) -> Iterator[bytes]:
    name = path[:-3] if path.endswith(".gz") else path
    with fs.open_file(path, "rb") as raw:
        fh = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
        if not name.endswith((".jsonl", ".json")):
            yield fh.read() if max_file_bytes is None else fh.read(max_file_bytes)
            return
        for text in jsonl_texts(fh, f"data.decontaminate.eval_files: {path}:"):
            yield text.encode("utf-8")


def jsonl_texts(lines: Iterable[bytes], where: str) -> Iterator[str]:
    """The texts of a JSONL evaluation file, one line at a time (blank lines skipped): every
    string value of each record (record_strings). A line that is not JSON is a ValueError
    `<where><line number>: not JSON (...)`; the one parse of the format, for the data stage's
    reader above and the check before the first stage (eval_inputs.py)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise ValueError(f"{where}{number}: not JSON ({err})") from None
        yield from record_strings(record)


def resolve_eval_sets(patterns: tuple[str, ...], decoded: dict[str, tuple[str, ...]] | None = None
                      ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """((set name = its pattern, matching files sorted) ...); a pattern matching nothing is a
    named error (a typo must not turn decontamination off). decoded: the files an `examples:`
    entry was decoded into (components/text_example_gen/eval_split.py); a `home:` entry must
    have been resolved by the runner (runners/local/eval_homes.py) before it gets here."""
    sets = []
    for i, pattern in enumerate(patterns):
        if pattern in (decoded or {}):
            sets.append((pattern, tuple(decoded[pattern])))
            continue
        if pattern.startswith((HOME_PREFIX, EXAMPLES_PREFIX)):
            raise ValueError(f"data.decontaminate.eval_files: {pattern!r} was not resolved: "
                             "`home:` is resolved by bigtrain run / compile, `examples:` decoded "
                             "by the data stage's executor")
        files = tuple(listing.resolve_files(pattern, f"data.decontaminate.eval_files[{i}]"))
        sets.append((pattern, files))
    return tuple(sets)


class EvalIndex(NamedTuple):
    names: tuple[str, ...]
    hashes: tuple[np.ndarray, ...]  # per set: sorted distinct n-gram and short-text hashes
    n: int
    lengths: tuple[int, ...] = ()   # every word length a hash of some set has (n included)
    texts: tuple[int, ...] = ()     # per set: texts with at least one word
    too_short: tuple[int, ...] = () # per set: texts of fewer than min_words words, not checked
    min_words: int = 8
    prefilter: prefilter_lib.Prefilter | None = None   # None: every document gets the full rule

    def sizes(self) -> dict[str, int]:
        return {name: len(h) for name, h in zip(self.names, self.hashes)}

    def matched(self, text: bytes) -> dict[str, int]:
        """{set: the longest word sequence text shares with it (n for an n-gram)} for each set
        sharing an n-gram or holding a short text that occurs inside text (set order). A
        document the exact prefilter rules out (prefilter.py) is not hashed."""
        if self.prefilter is not None and not self.prefilter.may_match(joined(text)):
            return {}
        grams, lengths = sequence_hashes(normalized(text), self.lengths)
        found = {}
        for name, index in zip(self.names, self.hashes):
            if len(index) and len(grams):
                positions = np.minimum(np.searchsorted(index, grams), len(index) - 1)
                hit = index[positions] == grams
                if np.any(hit):
                    found[name] = int(lengths[hit].max())
        return found

    def matches(self, text: bytes) -> tuple[str, ...]:
        """The sets sharing at least one n-gram or short text with text (in set order)."""
        return tuple(self.matched(text))


def index_texts(sets: dict[str, list[bytes]], n: int, min_words: int = 8) -> EvalIndex:
    """The index of {set name: texts}."""
    hashes, texts, too_short, lengths, entries = [], [], [], {n}, []
    for set_texts in sets.values():
        parts, words = [np.zeros(0, dtype=np.uint64)], []
        for text in set_texts:
            found, count = text_hashes(text, n, min_words)
            words.append(count)
            if found is not None and count:
                parts.append(found)
                lengths.add(min(count, n))
                entries.append(_joined_entries(text, n, min_words))
        hashes.append(np.unique(np.concatenate(parts)))
        texts.append(sum(1 for count in words if count))
        too_short.append(sum(1 for count in words if 0 < count < min_words))
    return EvalIndex(tuple(sets), tuple(hashes), n, tuple(sorted(lengths)), tuple(texts),
                     tuple(too_short), min_words, prefilter_lib.build(entries))


def _joined_entries(text: bytes, n: int, min_words: int):
    """(joined form, entry starts, entry ends) of one evaluation text (prefilter.build)."""
    norm = normalized(text)
    starts, ends = word_bounds(norm)
    return (norm.replace(b" ", b""), *prefilter_lib.joined_entries(norm, starts, ends, n, min_words))


def build_index(eval_sets: tuple[tuple[str, tuple[str, ...]], ...], n: int,
                min_words: int = 8) -> EvalIndex:
    """The index of resolved evaluation sets (resolve_eval_sets)."""
    return index_texts({name: [t for path in files for t in eval_texts(path)]
                        for name, files in eval_sets}, n, min_words)
