"""MinHash shingle hashing as its definition says (components/corpus/minhash.py), whichever path
computes it: the powers of the base cached per process or computed for a text past the cache,
and the signature over every shingle hash (repeats kept) equal to the one over the distinct
ones."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from components.corpus import minhash

M64 = (1 << 64) - 1


def mix(x: int) -> int:
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def reference(data: bytes, start: int, end: int) -> int:
    """sum_j (data[start + j] + 1) * BASE^j mod 2^64, mixed, its length mixed in."""
    start, end = int(start), int(end)
    raw = sum((byte + 1) * pow(int(minhash._BASE), j, 1 << 64)
              for j, byte in enumerate(data[start:end])) & M64
    return mix(raw ^ mix(end - start))


@pytest.mark.parametrize("cap", [1 << 20, 64, 8])
def test_substring_hashes_follow_the_definition_in_and_past_the_cache(monkeypatch, cap):
    monkeypatch.setattr(minhash, "_POWERS_CAP", cap)
    monkeypatch.setattr(minhash, "_powers_cache", (np.ones(1, np.uint64),) * 2)
    rng = np.random.default_rng(cap)
    for size in (1, 7, 40, 300, 1000, 50):   # growing past a small cache, then shorter
        data = bytes(rng.integers(0, 256, size, dtype=np.uint8))
        starts = rng.integers(0, size, 20)
        ends = np.minimum(starts + rng.integers(1, 30, 20), size)
        got = minhash.substring_hashes(data, starts, ends)
        assert got.tolist() == [reference(data, s, e) for s, e in zip(starts, ends)]
    short = b"abc def"
    assert minhash.substring_hashes(short, np.array([0]), np.array([7])).tolist() == [
        reference(short, 0, 7)]


def test_the_signature_over_repeated_shingles_is_the_one_over_distinct_ones():
    text = b"to be or not to be " * 20 + b"that is the question"
    every = minhash.shingle_hashes(text, "word", 2, distinct=False)
    distinct = minhash.shingle_hashes(text, "word", 2)
    assert len(every) > len(distinct) == len(np.unique(every))
    a, b = minhash.permutations(128, 1)
    signer = minhash.Signer(minhash.MinHashParams(128, 16, 8, "word", 2, 1))
    assert np.array_equal(signer.signature(text), minhash.signature(distinct, a, b))


def plain_band_key(values: list[int], band: int, rows: int) -> bytes:
    """The definition written out (minhash.py's docstring): the 2-byte big-endian band index,
    then the 8-byte BLAKE2b of the band's `rows` uint32 values, little-endian, in order."""
    part = values[band * rows:(band + 1) * rows]
    assert len(part) == rows
    return band.to_bytes(2, "big") + hashlib.blake2b(struct.pack(f"<{rows}I", *part),
                                                      digest_size=8).digest()


def test_band_keys_are_pinned_and_cover_every_row_of_their_band():
    """2 bands of 13 rows: each key equals the plain definition and a pinned value (computed with
    plain_band_key, 2026-11-27); a signature differing in a band's last row differs in that
    band's key only. A key over 12 of the 13 rows passed the S-curve test (3 sd + 0.03)."""
    values = [1000003 * i + 7 for i in range(26)]
    keys = minhash.band_keys(np.array(values, np.uint32), 2, 13)
    assert keys == [plain_band_key(values, band, 13) for band in range(2)]
    assert [key.hex() for key in keys] == ["00000104ac752341dbae", "00011bfd4d3be27e74af"]
    for last_row in (12, 25):
        changed = list(values)
        changed[last_row] += 1
        other = minhash.band_keys(np.array(changed, np.uint32), 2, 13)
        assert [a != b for a, b in zip(keys, other)] == [last_row == 12, last_row == 25]
