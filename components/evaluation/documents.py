"""Whole-document evaluation: the headline figure a user can compare with `xz -9 file`.

Which documents. The eval split's documents, decoded back from its shards (the data stage's own
decoder, components/text_example_gen/eval_split.py), each keyed by sha256(DOCUMENT_SEED + its
ids): the documents with the smallest keys whose bytes fit eval.document_bytes, each cut to its
first eval.max_document_bytes (one long file would otherwise be the whole sample). The key depends
on the document alone, so every model on the same Examples sees the same documents, in the same
order, wherever they sit in the shards.

How the model scores one. The stream a document had in training, [BOS] ids [EOS]: every id after
BOS is a target (EOS too: the model says where the file ends, as a compressor stores its length).
The standard strided evaluation (Hugging Face's "perplexity of fixed-length models"): windows of
context + 1 ids start every stride = context - eval.stride_context ids; each scores only the
targets no earlier window scored, so every target is scored once and every target after the first
window has at least stride_context ids of its document before it. stride_context 0 gives the
training windows' layout (consecutive windows share one id); -1 = half the context (the default,
config/evaluation.py says why); at most context - 1 (windows must advance).

Compressors on the same bytes. zlib-9 and lzma-9 on each document alone, the sizes summed (what
`gzip -9` / `xz -9` on each file costs: container headers included, as a user pays them), and on
the documents concatenated in key order (named `concatenated_*`: what an archive of the set costs).
Bits per byte everywhere = bits / the documents' UTF-8 bytes (the text the ids decode to).
"""

from __future__ import annotations

import hashlib
import heapq
import lzma
import math
import zlib
from typing import Callable, Iterable

import numpy as np

DOCUMENT_SEED = "bigtrain-eval-documents-1:"
# The ModelEvaluation properties of this evaluation (one owner: writers and readers import these).
DOCUMENT_FIGURES = ("document_bits_per_byte", "document_bits_per_byte_standard_error",
                    "document_zlib9_bits_per_byte", "document_lzma9_bits_per_byte",
                    "concatenated_zlib9_bits_per_byte", "concatenated_lzma9_bits_per_byte")
DOCUMENT_COUNTS = ("document_count", "document_bytes", "document_tokens", "document_stride_context")
# Under this many bytes scored, no verdict against the compressors: their container headers
# dominate (lzma-9's xz header and footer are ~60 bytes: 0.12 bits/byte of a 4 KB document, 5.3
# of a 90-byte one), so "beats lzma-9 by 18 bits/byte" would be the header, not the model.
COMPARABLE_BYTES = 4096


def stride_context_for(stride_context: int, context: int) -> int:
    """eval.stride_context resolved for a model's context: -1 = half of it (module docstring)."""
    resolved = context // 2 if stride_context < 0 else stride_context
    if not 0 <= resolved < context:
        raise ValueError(f"eval.stride_context: {stride_context} must be < the model's context "
                         f"length {context} (windows must advance), or -1 for half of it")
    return resolved


def _cut(ids: np.ndarray, byte_lengths: np.ndarray, max_bytes: int) -> np.ndarray:
    """The longest prefix of ids whose bytes fit max_bytes."""
    fits = np.cumsum(byte_lengths[ids]) <= max_bytes
    return ids[:int(np.count_nonzero(fits))]


def choose_documents(documents: Iterable[np.ndarray], byte_lengths: np.ndarray, total_bytes: int,
                     max_document_bytes: int, seed: str = DOCUMENT_SEED,
                     tally: dict | None = None) -> list[np.ndarray]:
    """The documents (id arrays, no specials) with the smallest keys whose bytes, each cut to
    max_document_bytes, sum to at most total_bytes; smallest key first. A document larger than
    total_bytes alone is never chosen (nor does it push others out). Streams: holds the chosen
    set plus one document (a max-heap on the key, the largest dropped while over the budget).
    tally, when given, gets "documents" (those with a byte) and "smallest" (bytes)."""
    heap: list[tuple[int, int, int, np.ndarray]] = []      # (-key, order, bytes, ids)
    held = 0
    tally = {} if tally is None else tally
    for order, ids in enumerate(documents):
        ids = _cut(np.asarray(ids, np.int64), byte_lengths, max_document_bytes)
        size = int(byte_lengths[ids].sum())
        if not size:
            continue
        tally["documents"] = tally.get("documents", 0) + 1
        tally["smallest"] = min(tally.get("smallest", size), size)
        if size > total_bytes:
            continue
        key = int.from_bytes(hashlib.sha256(seed.encode() + ids.tobytes()).digest()[:16], "big")
        heapq.heappush(heap, (-key, order, size, ids))  # order: equal texts
        held += size
        while held > total_bytes and heap:
            held -= heapq.heappop(heap)[2]
    return [item[3] for item in sorted(heap, key=lambda item: (-item[0], item[1]))]


def strided_windows(length: int, context: int, stride_context: int) -> list[tuple[int, int, int]]:
    """(begin, first scored position, end) of each window over a stream of `length` ids: the
    window's inputs are ids[begin:begin + context], its targets ids[begin + 1:end], of which
    positions >= first are scored (module docstring). Positions index the stream."""
    stride = context - stride_context
    windows, scored_to = [], 1                         # position 0 (BOS) is never a target
    for begin in range(0, max(length - 1, 1), stride):
        end = min(begin + context + 1, length)
        windows.append((begin, scored_to, end))
        scored_to = end
        if end == length:
            break
    return windows


def document_nats(logits_fn: Callable, documents: list[np.ndarray], *, context: int,
                  stride_context: int, batch_size: int, bos_id: int, eos_id: int,
                  pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document: (nats summed over its scored targets, number of targets), float64 / int64.
    logits_fn: int32 numpy (B, context) -> logits (B, context, V); windows of every document share
    batches; a short window is padded at the right (causal: padding never reaches its targets)."""
    import tensorflow as tf
    rows, targets, masks, owner = [], [], [], []
    for index, ids in enumerate(documents):
        stream = np.concatenate([[bos_id], ids, [eos_id]]).astype(np.int32)
        for begin, first, end in strided_windows(len(stream), context, stride_context):
            window = np.full(context + 1, pad_id, np.int32)
            window[:end - begin] = stream[begin:end]
            position = np.arange(begin + 1, begin + context + 1)       # each target's position
            rows.append(window[:-1])
            targets.append(window[1:])
            masks.append((position >= first) & (position < end))
            owner.append(index)
    nats = np.zeros(len(documents), np.float64)
    counts = np.zeros(len(documents), np.int64)
    for start in range(0, len(rows), batch_size):
        part = slice(start, start + batch_size)
        logits = tf.cast(logits_fn(np.stack(rows[part])), tf.float32)              # (B, T, V)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(np.stack(targets[part]),
                                                                logits).numpy()      # (B, T)
        mask = np.stack(masks[part])
        np.add.at(nats, owner[part], np.where(mask, losses, 0.0).astype(np.float64).sum(axis=1))
        np.add.at(counts, owner[part], mask.sum(axis=1))
    return nats, counts


def compressed_bits_per_byte(texts: list[bytes]) -> dict:
    """zlib-9 / lzma-9 bits per byte of the texts, each alone (sizes summed) and concatenated.
    Standard library, one call each: nothing to hand-write."""
    size = max(sum(len(t) for t in texts), 1)
    joined = b"".join(texts)
    return {"document_zlib9_bits_per_byte": 8.0 * sum(len(zlib.compress(t, 9)) for t in texts) / size,
            "document_lzma9_bits_per_byte": 8.0 * sum(len(lzma.compress(t, preset=9)) for t in texts) / size,
            "concatenated_zlib9_bits_per_byte": 8.0 * len(zlib.compress(joined, 9)) / size,
            "concatenated_lzma9_bits_per_byte": 8.0 * len(lzma.compress(joined, preset=9)) / size}


def document_figures(logits_fn: Callable, documents: list[np.ndarray], tokenizer, *, context: int,
                     stride_context: int, batch_size: int) -> dict:
    """The model's and the compressors' bits per byte on the same documents, with the counts
    (DOCUMENT_FIGURES, DOCUMENT_COUNTS) and the standard error of the model's figure with
    documents as the sampling unit (the eval sample's ratio estimator)."""
    from components.metrics.lm import ratio_standard_error
    if not documents:
        raise ValueError("no eval documents to score (the eval split holds no document, or "
                         "eval.document_bytes is 0)")
    stride_context = stride_context_for(stride_context, context)
    texts = [tokenizer.decode(ids) for ids in documents]
    nats, counts = document_nats(logits_fn, documents, context=context,
                                 stride_context=stride_context, batch_size=batch_size,
                                 bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id,
                                 pad_id=tokenizer.pad_id)
    sizes = np.array([len(t) for t in texts], np.float64)
    bits = nats / math.log(2)
    figures = {"document_bits_per_byte": float(bits.sum() / sizes.sum()),
               "document_bits_per_byte_standard_error": ratio_standard_error(bits, sizes),
               "document_count": len(documents), "document_bytes": int(sizes.sum()),
               "document_tokens": int(counts.sum()), "document_stride_context": stride_context}
    figures.update(compressed_bits_per_byte(texts))
    return figures
