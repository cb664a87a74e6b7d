"""The data stage's numpy Example encoder (shards.framed_examples) writes, byte for byte, what
tfx_bsl's encoder framed record by record writes (frame_records(encode_examples(...))), on every
path it takes: ids of one byte, a few two-byte ids (runs copied), more (a mask), dense two-byte
ids and ids of 2^14 and above or negative (tfx_bsl), windows whose Example lengths cross a varint
boundary (several record prefixes in one batch)."""

from __future__ import annotations

import numpy as np
import pytest

from components.text_example_gen import shards


def reference(windows: np.ndarray) -> bytes:
    return shards.frame_records(shards.encode_examples(windows))


def ascii_windows(rows: int, width: int, two_byte: float, seed: int = 0,
                  high: int = 259) -> np.ndarray:
    """Printable ASCII ids with a share of ids from [128, high) (specials, UTF-8 bytes)."""
    rng = np.random.default_rng(seed)
    windows = rng.integers(32, 127, size=(rows, width))
    chosen = rng.random(windows.shape) < two_byte
    windows[chosen] = rng.integers(128, high, size=int(chosen.sum()))
    return windows


@pytest.mark.parametrize("two_byte", [0.0, 0.0001, 0.002, 0.05, 0.3, 1.0])
@pytest.mark.parametrize("width", [1, 2, 63, 129, 300])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_framed_examples_equal_tfx_bsl_framed(two_byte, width, dtype):
    windows = ascii_windows(max(1, 40_000 // width), width, two_byte).astype(dtype)
    assert shards.framed_examples(windows) == reference(windows)


def test_payload_lengths_across_a_varint_boundary_in_one_batch():
    """Rows of 126..130 payload bytes: Int64List lengths on both sides of 128 (a one- and a
    two-byte length), so the batch has several record prefixes."""
    windows = np.full((5, 126), 65)
    for row in range(5):
        windows[row, :row] = 257               # row r: r two-byte ids, 126 + r bytes
    assert shards.framed_examples(windows) == reference(windows)


@pytest.mark.parametrize("ids", [
    [[2**14 - 1, 5, 0]], [[2**14, 5, 0]], [[2**40, 1, 2]], [[-1, 3, 2**63 - 1]],
    ascii_windows(30, 129, 0.01, high=2**14).tolist()])
def test_large_and_negative_ids(ids):
    windows = np.array(ids, dtype=np.int64)
    assert shards.framed_examples(windows) == reference(windows)


def test_an_empty_batch_is_no_bytes():
    assert shards.framed_examples(np.zeros((0, 129), np.int32)) == b""


def test_framed_examples_read_back_as_the_windows(tmp_path):
    windows = ascii_windows(50, 129, 0.002)
    path = str(tmp_path / "piece.gz")
    writer = shards.PieceWriter(path)
    writer.write(shards.framed_examples(windows))
    writer.close()
    assert np.array_equal(np.stack(list(shards.read_windows(path))), windows)
