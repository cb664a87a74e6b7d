"""Tokenizer-independent loss: bits per byte.

A model's loss in nats per token depends on what a token is; bits per byte does not. Over the same
raw text, sum the next-token losses (nats) of every predicted token and divide by the UTF-8 bytes
of that text: bits_per_byte = total_nats / raw_bytes / ln 2. Two models with different tokenizers
compare fairly on it (bytes_per_token converts: bpb = nats_per_token / bytes_per_token / ln 2).
"""

from __future__ import annotations

import math


def bits_per_byte(total_nats: float, raw_bytes: int) -> float:
    """Total next-token loss in nats over a text, per raw UTF-8 byte of that text, in bits."""
    if raw_bytes <= 0:
        raise ValueError(f"bits per byte needs raw_bytes > 0, got {raw_bytes}")
    if total_nats < 0 or math.isnan(total_nats):
        raise ValueError(f"total_nats must be a non-negative number of nats, got {total_nats}")
    return total_nats / raw_bytes / math.log(2)
