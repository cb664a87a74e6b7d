"""Packing rule as plain functions, streamed: documents in -> fixed-length windows out.

Packing rule. The documents of one work unit (one byte range of a big file, or a batch of small
files in path order) that fall in the same split are concatenated, in reading order, into one
stream `[BOS] doc_1 [EOS] [BOS] doc_2 [EOS] ...`. Sequence i is the window
`stream[i * seq_len : i * seq_len + seq_len + 1]`: consecutive windows overlap by one id, so every
id after the first is a target exactly once (inputs = window[:-1], targets = window[1:]). Only the
last window of a (unit, split) stream is padded with PAD_ID. A document may span windows; BOS/EOS
mark where documents meet.

Each sequence therefore depends only on the documents of its own unit: packing needs no grouping
across workers and holds at most one document plus one window in memory.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID, encode_bytes

# Ids gathered before windows are cut (one concatenate per ~64K ids, not per document).
_DRAIN_IDS = 1 << 16


class Packer:
    """Streams documents into windows of seq_len + 1 ids (int32) following the packing rule."""

    def __init__(self, seq_len: int, tokenize: Callable[[bytes], np.ndarray] = encode_bytes,
                 specials: tuple[int, int, int] = (PAD_ID, BOS_ID, EOS_ID)):
        """specials: the tokenizer's (pad, bos, eos) ids."""
        self.seq_len = seq_len
        self._tokenize = tokenize
        self._pad_id = specials[0]
        self._bos = np.array([specials[1]], dtype=np.int32)
        self._eos = np.array([specials[2]], dtype=np.int32)
        self._parts: list[np.ndarray] = []
        self._pending_ids = 0
        self.last_tokens = 0      # ids of the last document added (no BOS/EOS): per-source counts

    def add(self, text: bytes) -> np.ndarray | None:
        """Add one document; returns the windows completed so far (n, seq_len + 1) or None."""
        ids = self._tokenize(text)
        self.last_tokens = len(ids)
        self._parts += [self._bos, ids, self._eos]
        self._pending_ids += len(ids) + 2
        return self._drain() if self._pending_ids >= _DRAIN_IDS else None

    def _drain(self) -> np.ndarray | None:
        width = self.seq_len + 1
        if self._pending_ids < width:
            return None
        stream = np.concatenate(self._parts).astype(np.int32, copy=False)
        count = (len(stream) - 1) // self.seq_len
        # A strided view, no index arrays: window i starts at i * seq_len.
        windows = np.lib.stride_tricks.sliding_window_view(stream, width)[::self.seq_len][:count]
        rest = stream[count * self.seq_len:]      # >= 1 id: the last target is the next input
        self._parts, self._pending_ids = [rest], len(rest)
        return windows

    def finish(self) -> np.ndarray | None:
        """The remaining full windows and the padded last one."""
        full = self._drain()
        rest = np.concatenate(self._parts) if self._parts else np.empty(0, np.int32)
        self._parts, self._pending_ids = [], 0
        if len(rest) <= 1:
            return full  # no target left to predict
        last = np.full((1, self.seq_len + 1), self._pad_id, dtype=np.int32)
        last[0, :len(rest)] = rest
        return last if full is None else np.concatenate([full, last])
