"""Packing rule, splitting rule and file classification: the data stage's logic as plain functions.

Packing rule. The documents of one bucket are sorted by relative path and concatenated into one
stream `[BOS] doc_1 [EOS] [BOS] doc_2 [EOS] ...`. Sequence i is the window
`stream[i * seq_len : i * seq_len + seq_len + 1]`: consecutive windows overlap by one id, so every
id after the first is a training target exactly once (inputs = window[:-1], targets = window[1:]).
Only the last window of a bucket is padded with PAD_ID. A document may span windows; BOS/EOS mark
where documents meet, so the model learns document boundaries instead of guessing them.

Splitting rule. A file's split is decided by sha256(salt + relative path): the same file always
lands in the same split, whatever else is in the corpus or how the work is parallelized.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator

import numpy as np

from components.text_example_gen import tokenizer

# Quarantine reasons: every file that is not packed is counted under exactly one.
EMPTY, UNREADABLE, BINARY, NOT_UTF8, TOO_LARGE = "empty", "unreadable", "binary", "not_utf8", "too_large"
SKIP_REASONS = (EMPTY, UNREADABLE, BINARY, NOT_UTF8, TOO_LARGE)


def _unit_hash(text: str) -> float:
    """A stable hash of text mapped to [0, 1)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_for(relative_path: str, eval_fraction: float, salt: str = "") -> str:
    """'eval' for about eval_fraction of paths, else 'train'; deterministic per path."""
    return "eval" if _unit_hash(salt + relative_path) < eval_fraction else "train"


def bucket_for(relative_path: str, num_buckets: int) -> int:
    return int(_unit_hash("bucket:" + relative_path) * num_buckets)


def classify(data: bytes) -> str | None:
    """None for packable text, else the quarantine reason."""
    if not data:
        return EMPTY
    if b"\x00" in data:
        return BINARY
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8
    return None


def pack_documents(documents: Iterable[bytes], seq_len: int) -> Iterator[np.ndarray]:
    """Yield int64 windows of length seq_len + 1 following the packing rule above."""
    parts = [tokenizer.document_ids(doc) for doc in documents]
    if not parts:
        return
    stream = np.concatenate(parts)
    # Windows start every seq_len ids; the last start must still leave a target to predict.
    for start in range(0, max(len(stream) - 1, 1), seq_len):
        window = stream[start:start + seq_len + 1]
        if len(window) < seq_len + 1:
            window = np.concatenate(
                [window, np.full(seq_len + 1 - len(window), tokenizer.PAD_ID, dtype=np.int64)])
        yield window


def stream_length(document_sizes: Iterable[int]) -> int:
    """Ids in a bucket's stream: each document adds its bytes plus BOS and EOS."""
    return sum(size + 2 for size in document_sizes)
