"""An exact prefilter of decontamination (contamination.EvalIndex.matched): the training
documents that cannot contain any entry of the index (an evaluation n-gram, or a short text),
told with one bytes.translate pass and a few numpy passes over 8-byte words, before any word is
hashed. It never changes a result; it only skips work.

Joined form: a text normalized (contamination.normalized) with its spaces removed, the bytes of
its words back to back (one C pass: `text.translate(table, separators)`). A document
containing an entry (its normalized words in a row) contains the entry's joined form in its
joined form.

Anchors. An entry whose joined form has at least SPAN_MIN (15) bytes registers STRIDE (8)
windows of 8q bytes (q: its tier, the largest of TIERS with 8q + 7 <= its length): those
starting at p, p + 1, ..., p + 7 of its joined form, for the p whose windows are rarest in the
evaluation sets themselves (smallest largest count). A document is probed at the windows of each tier starting
at 0, 8, 16, ... of its joined form; any 8 consecutive offsets hold a multiple of 8, so a
document containing an entry has one of that entry's windows probed. Windows are compared by a
64-bit hash of their bytes (equal bytes, equal hash): a document with no probe among the
registered hashes contains no anchored entry. Entries of 8 to SPAN_MIN - 1 bytes (13-grams of
one-letter words, hex digits) do the same in a narrow tier: 8-byte windows, s of them, probed
every s bytes, s = the shortest such entry's length - 7. An entry under 8 bytes (min_words < 8)
is kept whole: the document's joined form is searched for it (`in`); with more than SHORT_MAX
of them the prefilter is off (None).
A probe that hits only says "maybe" (word boundaries are gone; hashes may collide): the
document then gets the full rule.

Cost: per document byte one translate pass and, per 8 bytes, QMAX multiply-adds and one
lookup per tier in a flag table sized to the tier (about 1 in 64 flags set, 2^24 at most: a
tier of few windows stays in cache), then an exact 64-bit check of the flagged probes only.
Memory: 8 bytes per registered window (at most STRIDE per entry) and the tables. Build: a few
numpy passes per tier over the evaluation sets' joined bytes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

STRIDE = 8
SPAN_MIN = 8 + STRIDE - 1  # the shortest entry that holds STRIDE windows of 8 bytes
SHORT_MAX = 32
# The window lengths in 8-byte words an entry may register: the longest that fits it. Long
# windows are rare in training text; each tier costs a lookup per probe (on the stdlib against
# the default set, 2026-12-07: tiers 1-6 ruled out all 895 documents, 1, 2, 4, 6 all but one at
# 4 lookups, 1, 3, 5 all but 22, 1, 5 all but 505).
TIERS = (1, 2, 4, 6)
QMAX = TIERS[-1]
FLAGS_PER_WINDOW = 64      # table flags per registered window (2^24 at most)
COUNT_BITS = 22            # windows counted in up to 2^22 buckets to rank them (collisions: ranks
                           # only), about 2 per window
# Odd 64-bit multipliers, one per 8-byte word of a window (fixed: build and probe agree).
_MULTIPLIERS = tuple(np.uint64(m) for m in (
    0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
    0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53))


class Tier(NamedTuple):
    q: int                     # window length in 8-byte words
    shift: np.uint64           # 64 - log2(len(table))
    table: np.ndarray          # bool flags of the top bits of its hashes: about 1 in 32 set
    hashes: np.ndarray         # sorted distinct hashes of its registered windows
    stride: int = STRIDE       # bytes between a document's probes


def tier_of(q: int, hashes: np.ndarray, stride: int = STRIDE) -> Tier:
    """A tier's lookup: a flag table sized to its windows (a small one stays in cache)."""
    bits = int(np.clip(np.ceil(np.log2(max(len(hashes), 1) * FLAGS_PER_WINDOW)), 12, 24))
    table = np.zeros(1 << bits, bool)
    table[hashes >> np.uint64(64 - bits)] = True
    return Tier(q, np.uint64(64 - bits), table, hashes, stride)


def _found(tier: Tier, h: np.ndarray) -> bool:
    """Whether a probe hash of h is one of the tier's registered windows."""
    hit = tier.table[h >> tier.shift]
    if not hit.any():
        return False
    found = h[hit]
    at = np.minimum(np.searchsorted(tier.hashes, found), len(tier.hashes) - 1)
    return bool(np.any(tier.hashes[at] == found))


class Prefilter(NamedTuple):
    tiers: tuple[Tier, ...]    # ascending q, probed every STRIDE bytes
    short: tuple[bytes, ...]   # joined forms of entries under 8 bytes, searched whole
    narrow: Tier | None = None # entries of 8 to SPAN_MIN - 1 bytes: 8-byte windows every
                               # narrow.stride bytes (the shortest such entry's length - 7)

    def may_match(self, joined: bytes) -> bool:
        """False when the document of this joined form contains no entry (see the module
        docstring); True when it may."""
        if any(entry in joined for entry in self.short):
            return True
        size = len(joined)
        if size < 8:
            return False
        padded = joined + bytes(8 * QMAX + 8)
        if self.narrow is not None:
            view = np.ndarray(((size - 8) // self.narrow.stride + 1,), "<u8", padded, 0,
                              (self.narrow.stride,))
            with np.errstate(over="ignore"):
                if _found(self.narrow, view * _MULTIPLIERS[0]):
                    return True
        if size < SPAN_MIN or not self.tiers:
            return False
        count = -(-size // STRIDE)
        words = np.frombuffer(padded, "<u8", count=count + QMAX)
        return any(_found(tier, h) for tier, h in zip(
            self.tiers, window_hashes(words, count, tuple(t.q for t in self.tiers))))


def window_hashes(words: np.ndarray, count: int, tiers: tuple[int, ...]):
    """(hashes of the windows of q words starting at words[0 .. count - 1]) for each q in
    tiers (ascending; words has count + tiers[-1] - 1 entries at least)."""
    h = np.zeros(count, np.uint64)
    term = np.empty(count, np.uint64)
    with np.errstate(over="ignore"):
        for i in range(tiers[-1]):
            np.multiply(words[i:i + count], _MULTIPLIERS[i], out=term)
            h += term
            if i + 1 in tiers:
                yield h


def joined_entries(norm: bytes, starts: np.ndarray, ends: np.ndarray, n: int,
                   min_words: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) offsets in the joined form of norm of its entries (contamination.text_hashes'
    rule: every n-gram of a text of n words or more, the whole text of min_words to n - 1
    words, none under min_words); starts, ends: its word bounds."""
    words = len(starts)
    first = np.arange(words - n + 1) if words >= n else np.zeros(
        1 if words >= min_words else 0, np.int64)
    last = first + min(words, n) - 1
    return starts[first] - first, ends[last] - last


def build(entries: list[tuple[bytes, np.ndarray, np.ndarray]]) -> Prefilter | None:
    """The prefilter of entries: (joined form of an evaluation text, entry starts, entry ends)
    per text; None when more than SHORT_MAX entries are under 8 bytes."""
    short = {joined[a:e] for joined, starts, ends in entries
             for a, e in zip(starts.tolist(), ends.tolist()) if e - a < 8}
    if len(short) > SHORT_MAX:
        return None
    texts, offset, ranges = [], 0, []
    for joined, starts, ends in entries:
        ranges.append(np.stack([starts + offset, ends + offset], 1))
        texts.append(joined)
        offset += len(joined) + 1
    ranges = np.concatenate(ranges or [np.zeros((0, 2), np.int64)])
    lengths = ranges[:, 1] - ranges[:, 0]
    fits = np.minimum(QMAX, (lengths - STRIDE + 1) // 8)
    fits = np.array(TIERS)[np.maximum(np.searchsorted(TIERS, fits, side="right") - 1, 0)]
    data = b"\n".join(texts) + bytes(8 * QMAX + 16)  # "\n": in no joined form
    tiers, narrow = [], None
    for q in np.unique(fits[lengths >= SPAN_MIN]).tolist():
        tier = ranges[(lengths >= SPAN_MIN) & (fits == q)]
        tiers.append(tier_of(q, np.unique(_anchor_windows(_every_window(data, offset, q), tier,
                                                          q, STRIDE))))
    middle = ranges[(lengths >= 8) & (lengths < SPAN_MIN)]
    if len(middle):
        stride = int((middle[:, 1] - middle[:, 0]).min()) - 7
        narrow = tier_of(1, np.unique(_anchor_windows(_every_window(data, offset, 1), middle, 1,
                                                      stride)), stride)
    return Prefilter(tuple(tiers), tuple(sorted(short)), narrow)


def _every_window(data: bytes, size: int, q: int) -> np.ndarray:
    """The hash of the window of q words at every byte offset below size + 8 of data (eight
    views of its 8-byte words, shifted by 0 .. 7 bytes)."""
    hashes = np.zeros(size + 8, np.uint64)
    for shift in range(8):
        words = np.frombuffer(data, "<u8", offset=shift, count=(len(data) - shift) // 8)
        hashes[shift::8] = next(window_hashes(words, len(hashes[shift::8]), (q,)))
    return hashes


def _anchor_windows(hashes: np.ndarray, ranges: np.ndarray, q: int, stride: int) -> np.ndarray:
    """The stride window hashes each entry of ranges registers: from the start p in
    [start, end - 8q - stride + 1] whose stride windows have the smallest largest count over
    all windows (ties: the first); hashes: the window of q words at every byte offset."""
    bits = int(np.clip(np.ceil(np.log2(len(hashes))) + 1, 10, COUNT_BITS))
    key = (hashes >> np.uint64(64 - bits)).astype(np.int64)
    counts = np.bincount(key, minlength=1 << bits)[key]
    score = counts[:len(counts) - stride + 1].copy()
    for j in range(1, stride):
        np.maximum(score, counts[j:len(counts) - stride + 1 + j], out=score)
    order = np.append((score << 40) | np.arange(len(score)), 0)
    last = ranges[:, 1] - (8 * q + stride - 1) + 1          # one past the last start
    best = np.minimum.reduceat(order, np.stack([ranges[:, 0], last], 1).ravel())[::2]
    starts = best & ((1 << 40) - 1)
    return hashes[(starts[:, None] + np.arange(stride)).ravel()]
