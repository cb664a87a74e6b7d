"""The tokenizer's sample rule as plain functions (no Beam): which documents a tokenizer trains on.

Rule: every document gets a key, sha256(salt + content_key(text)) as a number in [0, 1) (the
content key of documents.py: duplicates share it); the sample is the documents with the smallest
(key, content key, reading position) whose sizes add up to `max_bytes`, the last one cut at a
character boundary to fill the budget exactly. With data.dedup=exact a content appears once, as
its first copy in reading order (the copy the data stage packs).

The rule depends only on the documents, never on the order they arrive in or on how the work is
split: `SampleAccumulator` keeps the smallest entries of whatever it was given, and two
accumulators merge into the accumulator of the union (the combiner of the Beam read,
sample_pipeline.py). Memory: about 2 x max_bytes of text per accumulator.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import NamedTuple

from components.corpus.documents import content_key, normalized

SAMPLE_SALT = "tokenizer-sample:"


class TokenizerTrainingError(ValueError):
    """The settings cannot produce a tokenizer from this sample; the message names the setting."""


def sample_key(key: str, salt: str = SAMPLE_SALT) -> float:
    """A document's sample key from its content key (hex): a number in [0, 1)."""
    digest = hashlib.sha256((salt + key).encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class Candidate(NamedTuple):
    """One document offered to the sample."""
    key: float                   # sample_key(digest)
    digest: str                  # content_key(text)
    position: tuple[int, int]    # (unit index, ordinal in the unit): reading order
    document_id: str
    text: str
    size: int                    # UTF-8 bytes of text
    budget_size: int             # bytes of the normalized text: equal for every copy


def candidate(document_id: str, text: bytes, position: tuple[int, int],
              digest: str | None = None, salt: str = SAMPLE_SALT) -> Candidate:
    digest = digest or content_key(text)
    return Candidate(sample_key(digest, salt), digest, tuple(position), document_id,
                     text.decode("utf-8"), len(text), len(normalized(text)))


def _order(c: Candidate):
    return c.key, c.digest, c.position


@dataclasses.dataclass
class Sample:
    texts: list[str]             # in key order
    document_ids: list[str]
    bytes: int                   # UTF-8 bytes in texts
    documents_seen: int = 0
    bytes_seen: int = 0


class SampleAccumulator:
    """The smallest candidates seen so far: add(), merge(), then sample().

    Compacting keeps the shortest prefix (in key order) whose normalized sizes reach the budget.
    Whatever is dropped has at least a budget of smaller entries before it, which every later
    merge keeps (or replaces by smaller ones), so compaction never changes the final sample; a raw
    text is never shorter than its normalized form, so the kept prefix always fills the budget."""

    def __init__(self, max_bytes: int, dedup: bool = True):
        if max_bytes <= 0:
            raise TokenizerTrainingError(f"sample size must be > 0 bytes, got {max_bytes}")
        self.max_bytes, self.dedup = max_bytes, dedup
        self.held: dict = {}     # identity -> Candidate
        self._held_bytes = 0
        # After a compaction: the largest kept key. A larger key can never enter the sample, so
        # callers skip building its candidate (wants(key)).
        self.cutoff: float | None = None

    def wants(self, key: float) -> bool:
        return self.cutoff is None or key <= self.cutoff

    def _identity(self, c: Candidate):
        return c.digest if self.dedup else (c.digest, c.position)

    def add(self, c: Candidate) -> None:
        if not c.size or not self.wants(c.key):
            return
        identity = self._identity(c)
        held = self.held.get(identity)
        if held is not None:
            if held.position <= c.position:
                return                       # a later copy: the first in reading order stays
            self._held_bytes -= held.budget_size
        self.held[identity] = c
        self._held_bytes += c.budget_size
        if self._held_bytes > 2 * self.max_bytes:   # amortized: a sort per budget of input
            self.compact()

    def merge(self, other: "SampleAccumulator") -> "SampleAccumulator":
        for c in sorted(other.held.values(), key=_order):   # smallest first: fewer kept
            self.add(c)
        return self

    def compact(self) -> None:
        kept, total, last = {}, 0, None
        for c in sorted(self.held.values(), key=_order):
            if total >= self.max_bytes:
                break
            kept[self._identity(c)] = c
            total, last = total + c.budget_size, c.key
        self.held, self._held_bytes = kept, total
        if total >= self.max_bytes:
            self.cutoff = last

    def sample(self) -> Sample:
        texts, ids, total = [], [], 0
        for c in sorted(self.held.values(), key=_order):
            text, size = c.text, c.size
            if total >= self.max_bytes:
                break
            if total + size > self.max_bytes:
                text = text.encode("utf-8")[:self.max_bytes - total].decode("utf-8", "ignore")
                size = len(text.encode("utf-8"))
            if size:
                texts.append(text)
                ids.append(c.document_id)
                total += size
        return Sample(texts, ids, total)
