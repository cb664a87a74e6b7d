"""MinHash signatures and LSH band keys of documents (numpy, vectorized; no Beam).

Shingles. A document's text is normalized (ASCII lowercase, runs of whitespace -> one space,
surrounding whitespace stripped); its shingles are the runs of `ngram` consecutive words
(`word`) or bytes (`byte`) of that text; a text shorter than one shingle is one shingle. Each
shingle is hashed to 32 bits by a polynomial hash over its bytes (mod 2^64, prefix sums, so every
shingle of a text is hashed in a few numpy passes), finished with splitmix64's mixer.

Signature. num_perm hash functions h_i(x) = ((a_i x + b_i) mod 2^64) div 2^32 over the 32-bit
shingle hashes x, with a_i odd and b_i 64-bit, drawn from numpy's PCG64 with a fixed seed
(multiply-add-shift, a strongly universal family for 32-bit keys; datasketch uses
(a x + b) mod (2^61 - 1), whose integer modulo costs numpy 5x the time): the signature is the
minimum of each h_i over the set of shingles. P(signature_i(A) = signature_i(B)) ~ Jaccard(A, B).

LSH. The signature is cut into `bands` bands of `rows` values; two documents are candidates
when one band is equal. A band key is (band index, 8-byte BLAKE2b of the band's values): two
different bands share a key with probability 2^-64 per pair.
"""

from __future__ import annotations

import functools
import hashlib
from typing import NamedTuple

import numpy as np

MAX_HASH = np.uint64((1 << 32) - 1)
# Shingles hashed against all num_perm functions at a time: num_perm x CHUNK x 8 bytes (8 MiB
# at 128), whatever the document's size.
CHUNK = 8192
_BASE = np.uint64(0x100000001B3)  # odd: invertible mod 2^64
_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))


class MinHashParams(NamedTuple):
    num_perm: int
    bands: int
    rows: int
    shingle: str  # word | byte
    ngram: int
    seed: int


def params_of(near_dedup) -> MinHashParams:
    """The parameters of a data.near_dedup config (bands derived when 0)."""
    bands, rows = ((near_dedup.bands, near_dedup.num_perm // near_dedup.bands) if near_dedup.bands
                   else optimal_bands(near_dedup.threshold, near_dedup.num_perm))
    return MinHashParams(near_dedup.num_perm, bands, rows, near_dedup.shingle, near_dedup.ngram,
                         near_dedup.seed)


def _integral(f, low: float, high: float, points: int = 2001) -> float:
    s = np.linspace(low, high, points)
    y = f(s)
    return float(np.sum((y[1:] + y[:-1]) * np.diff(s)) / 2)


@functools.lru_cache(maxsize=None)
def optimal_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) with bands x rows <= num_perm minimizing the false positive probability
    below threshold plus the false negative probability above it, equally weighted (the rule of
    datasketch's MinHashLSH; integrals by the trapezoid rule on 2001 points)."""
    best, best_error = (1, 1), float("inf")
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            def candidate(s, b=bands, r=rows):
                return 1 - (1 - s ** r) ** b
            false_positive = _integral(candidate, 0.0, threshold)
            false_negative = _integral(lambda s: 1 - candidate(s), threshold, 1.0)
            error = 0.5 * false_positive + 0.5 * false_negative
            if error < best_error:
                best, best_error = (bands, rows), error
    return best


def normalized(text: bytes) -> bytes:
    """ASCII lowercase, whitespace runs -> one space, stripped."""
    return b" ".join(text.lower().split())


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64 -> uint64, wrapping)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


# Powers of _BASE and of its inverse, cached per process for texts up to _POWERS_CAP bytes
# (2 x 8 bytes per byte of the longest text seen: 16 MiB at most); longer texts compute theirs.
_POWERS_CAP = 1 << 20
_powers_cache = (np.ones(1, np.uint64), np.ones(1, np.uint64))


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(BASE^j, BASE^-j) for j < n at least (mod 2^64)."""
    global _powers_cache
    if len(_powers_cache[0]) >= n:
        return _powers_cache
    size = max(n, min(2 * len(_powers_cache[0]), _POWERS_CAP))
    with np.errstate(over="ignore"):
        pair = tuple(np.concatenate([[np.uint64(1)], np.cumprod(np.full(size - 1, base,
                                                                       dtype=np.uint64))])
                     for base in (_BASE, _BASE_INVERSE))
    if size <= _POWERS_CAP:
        _powers_cache = pair
    return pair


def substring_hashes(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hashes of data[starts[k]:ends[k]] for every k: sum_j data[start + j] * BASE^j
    (mod 2^64, independent of where the substring lies), mixed, and its length mixed in."""
    size = len(data)
    powers, inverse = _powers(size + 1)
    values = np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    prefix = np.empty(size + 1, np.uint64)
    prefix[0] = 0
    with np.errstate(over="ignore"):
        values += np.uint64(1)
        values *= powers[:size]
        np.cumsum(values, out=prefix[1:])
        raw = (prefix[ends] - prefix[starts]) * inverse[starts]
        return _mix(raw ^ _mix((ends - starts).astype(np.uint64)))


def word_bounds(text: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of the space-separated words of a normalized text."""
    spaces = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 32)
    starts = np.concatenate([[0], spaces + 1]).astype(np.int64)
    ends = np.concatenate([spaces, [len(text)]]).astype(np.int64)
    return starts, ends


def word_ngram_hashes(text: bytes, n: int) -> np.ndarray:
    """64-bit hashes of every run of n consecutive words of a normalized text (one hash of the
    whole text when it has fewer than n words; none for an empty text)."""
    if not text:
        return np.zeros(0, dtype=np.uint64)
    starts, ends = word_bounds(text)
    count = max(len(starts) - n + 1, 1)
    return substring_hashes(text, starts[:count], ends[min(n, len(ends)) - 1:][:count])


def shingle_hashes(text: bytes, shingle: str, n: int, distinct: bool = True) -> np.ndarray:
    """The 32-bit shingle hashes of a document (text normalized here): the distinct ones
    (sorted), or with distinct=False every shingle's, repeats included, in text order (what
    the signature takes: its minimum is the same, and sorting out repeats costs about what
    signing 30% more shingles does, more than most documents repeat)."""
    text = normalized(text)
    if shingle == "word":
        hashes = word_ngram_hashes(text, n)
    elif shingle == "byte":
        count = max(len(text) - n + 1, 1) if text else 0
        starts = np.arange(count, dtype=np.int64)
        hashes = substring_hashes(text, starts, np.minimum(starts + n, len(text)))
    else:
        raise ValueError(f"data.near_dedup.shingle: {shingle!r} is not one of ('word', 'byte')")
    hashes &= MAX_HASH
    return np.unique(hashes) if distinct else hashes


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) coefficients of the hash family: fixed by the seed on every machine."""
    generator = np.random.Generator(np.random.PCG64(seed))
    a = generator.integers(0, 2**64, size=num_perm, dtype=np.uint64, endpoint=False) | np.uint64(1)
    b = generator.integers(0, 2**64, size=num_perm, dtype=np.uint64, endpoint=False)
    return a, b


def signature(hashes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The MinHash signature (uint32, one value per function) of a set of 32-bit shingle
    hashes. The minimum of the 64-bit values, then its high half: the same as the minimum of
    the high halves (the shift is monotone)."""
    out = np.full(len(a), np.iinfo(np.uint64).max, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for begin in range(0, len(hashes), CHUNK):
            values = a[:, None] * hashes[None, begin:begin + CHUNK]
            values += b[:, None]
            out = np.minimum(out, values.min(axis=1))
    return (out >> np.uint64(32)).astype(np.uint32)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """One key per band: 2-byte band index + 8-byte BLAKE2b of the band's values."""
    return [band.to_bytes(2, "big") + hashlib.blake2b(
        sig[band * rows:(band + 1) * rows].tobytes(), digest_size=8).digest()
        for band in range(bands)]


class Signer:
    """Band keys of documents under one set of parameters (coefficients drawn once)."""

    def __init__(self, params: MinHashParams):
        self.params = params
        self._a, self._b = permutations(params.num_perm, params.seed)

    def signature(self, text: bytes) -> np.ndarray:
        return signature(shingle_hashes(text, self.params.shingle, self.params.ngram,
                                        distinct=False), self._a, self._b)

    def band_keys(self, text: bytes) -> list[bytes]:
        return band_keys(self.signature(text), self.params.bands, self.params.rows)


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    return float(np.mean(sig_a == sig_b))
