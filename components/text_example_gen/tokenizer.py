"""Byte-level tokenizer: UTF-8 bytes are ids 0..255; three special ids follow.

No vocabulary file, no unknown tokens: every byte string round-trips exactly. The same mapping is
rebuilt inside the exported SavedModel with tf.strings ops, so serving needs none of this code.
"""

from __future__ import annotations

import numpy as np

PAD_ID = 256  # fills the tail of the last sequence of a bucket; never a training target
BOS_ID = 257  # starts every document
EOS_ID = 258  # ends every document
VOCAB_SIZE = 259
# The one tf.train.Example feature of a packed sequence: seq_len + 1 int64 ids.
FEATURE = "input_ids"


def encode(data: bytes) -> np.ndarray:
    """bytes -> int64 ids (one per byte)."""
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64)


def decode(ids) -> bytes:
    """ids -> bytes; special ids (pad, bos, eos) are dropped."""
    arr = np.asarray(ids, dtype=np.int64)
    return arr[(arr >= 0) & (arr < 256)].astype(np.uint8).tobytes()


def document_ids(data: bytes) -> np.ndarray:
    """One document as it enters the packed stream: [BOS] bytes [EOS]."""
    out = np.empty(len(data) + 2, dtype=np.int64)
    out[0] = BOS_ID
    out[1:-1] = encode(data)
    out[-1] = EOS_ID
    return out
