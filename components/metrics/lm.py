"""Language-model metrics over the eval split, for any logits function (an in-memory Keras model
during training, the exported SavedModel's `token_logits` signature in the Evaluator).

The evaluation sample (`eval_sample`): the max_sequences eval sequences with the smallest keys
sha256(EVAL_SAMPLE_SEED + serialized record), over every shard of the eval split. It depends on
the sequences alone (not their order, the shard count or who asks), so the Trainer, the Evaluator,
its variants and the baseline model measure the same sequences, spread over the whole split (the
first batches in file order were a few documents). A smaller sample is the head of a larger one.
The standard error of the loss treats sequences as the sampling unit (tokens within a sequence
are correlated): a ratio estimator's SE over per-sequence loss sums and token counts.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import lzma
import math
import zlib
from typing import Callable

import numpy as np
import tensorflow as tf


def evaluate_logits_fn(logits_fn: Callable, eval_files, seq_len: int, batch_size: int,
                       max_batches: int, *, tokenizer, in_graph: bool = True,
                       head_of: int = 0) -> dict:
    """Loss (nats/token), perplexity and next-token accuracy over non-pad targets, plus example
    and token counts, on the evaluation sample, max_batches x batch_size sequences (eval_sample: every
    model is measured on the same sequences). in_graph=False: logits_fn is plain Python (the
    TFLite Interpreter) and runs outside the tf.function. "batches" holds each batch's
    [loss sum, correct, tokens, bytes] in order: two models' rows pair up batch by batch (the
    Evaluator's paired variant deltas). tokenizer: the one the examples were encoded with (its
    pad_id is never a target). head_of: a larger sample size (> max_batches x batch_size) whose
    head is this sample (sample_head): one read of the split serves both (validation while
    training takes the head of the final evaluation's sample)."""
    # Raw UTF-8 bytes each id stands for, so bits per byte = total nats / bytes under the
    # targets / ln 2 compares models with different tokenizers.
    pad_id = tokenizer.pad_id
    byte_table = tf.constant(np.asarray(tokenizer.token_byte_lengths(), np.float32))
    sample = sample_head(eval_files, seq_len, batch_size * max_batches if max_batches > 0 else 0,
                         head_of)
    dataset = tf.data.Dataset.from_tensor_slices((sample[:, :-1], sample[:, 1:])).batch(batch_size)

    @tf.function
    def batch_stats(inputs, targets, logits=None):
        logits = tf.cast(logits_fn(inputs) if logits is None else logits, tf.float32)  # (B, T, V)
        mask = tf.cast(tf.not_equal(targets, pad_id), tf.float32)                 # (B, T)
        hit = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), targets), tf.float32)
        raw_bytes = tf.reduce_sum(tf.gather(byte_table, targets) * mask)
        token_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits) * mask
        return (tf.reduce_sum(token_losses, axis=1), tf.reduce_sum(hit * mask),
                tf.reduce_sum(mask, axis=1), raw_bytes)

    sequence_losses, sequence_tokens, rows = [], [], []
    for inputs, targets in dataset:
        l, c, n, b = batch_stats(inputs, targets) if in_graph else batch_stats(
            inputs, targets, tf.constant(logits_fn(inputs.numpy())))
        sequence_losses.append(l.numpy())
        sequence_tokens.append(n.numpy())
        rows.append([float(np.sum(sequence_losses[-1], dtype=np.float64)), float(c),
                     float(np.sum(sequence_tokens[-1], dtype=np.float64)), float(b)])
    correct = sum(row[1] for row in rows)
    total_bytes = sum(row[3] for row in rows)
    losses = np.concatenate(sequence_losses or [np.zeros(0)]).astype(np.float64)
    counts = np.concatenate(sequence_tokens or [np.zeros(0)]).astype(np.float64)
    loss_sum, tokens = float(losses.sum()), float(counts.sum())
    if not tokens:
        raise ValueError(f"no eval tokens in {eval_files!r} (eval split holds no sequence?)")
    loss = loss_sum / tokens
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "accuracy": correct / tokens,
            "examples": int(len(losses)), "tokens": int(tokens),
            "bits_per_byte": loss_sum / max(total_bytes, 1.0) / math.log(2),
            "eval_bytes": int(total_bytes),
            "sample_sequences": int(len(losses)), "sample_seed": EVAL_SAMPLE_SEED,
            "loss_standard_error": ratio_standard_error(losses, counts), "batches": rows}


EVAL_SAMPLE_SEED = "bigtrain-eval-sample-1:"


def sample_size(eval_config) -> int:
    """The evaluation sample's size for an eval config: eval.batch_size x eval.max_batches
    sequences (0 = the whole split), as evaluate_logits_fn draws it."""
    return eval_config.batch_size * max(eval_config.max_batches, 0)


def ratio_standard_error(sums: np.ndarray, counts: np.ndarray) -> float:
    """SE of sum(sums) / sum(counts) with sequences as the units (delta method); 0 for < 2."""
    m = len(sums)
    if m < 2 or not counts.sum():
        return 0.0
    ratio = sums.sum() / counts.sum()
    residuals = sums - ratio * counts
    return float(math.sqrt((residuals ** 2).sum() / (m * (m - 1))) / counts.mean())


def eval_sample(eval_files, seq_len: int, max_sequences: int,
                seed: str = EVAL_SAMPLE_SEED) -> np.ndarray:
    """(n, seq_len + 1) int32: the evaluation sample (module docstring); max_sequences 0 = all.
    Streams the split holding at most max_sequences records. Cached per process: the
    Evaluator's model, variants and baseline reuse one read."""
    names = sorted(f for p in ([eval_files] if isinstance(eval_files, str) else eval_files)
                   for f in tf.io.gfile.glob(p))
    if not names:
        raise FileNotFoundError(f"no TFRecord files match {eval_files!r}")
    return _cached_sample(tuple(names), seq_len, max_sequences, seed).copy()


def sample_head(eval_files, seq_len: int, max_sequences: int, head_of: int = 0) -> np.ndarray:
    """eval_sample(max_sequences), read as the head of the cached eval_sample(head_of) when
    head_of is larger (a smaller sample is the head of a larger one: the same rows, in the same
    order); eval_sample(max_sequences) itself otherwise (head_of 0, or not larger: a bounded
    sample is never widened to a read of the whole split)."""
    if max_sequences and head_of > max_sequences:
        return eval_sample(eval_files, seq_len, head_of)[:max_sequences]
    return eval_sample(eval_files, seq_len, max_sequences)


@functools.lru_cache(maxsize=4)
def _cached_sample(names: tuple, seq_len: int, max_sequences: int, seed: str) -> np.ndarray:
    from schemas import FEATURE
    heap: list[tuple[int, bytes]] = []        # (-key, record): a max-heap on the key
    salt = seed.encode("utf-8")
    for record in tf.data.TFRecordDataset(list(names), compression_type="GZIP").as_numpy_iterator():
        item = (-int.from_bytes(hashlib.sha256(salt + record).digest()[:16], "big"), record)
        if not max_sequences or len(heap) < max_sequences:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    records = [r for _, r in sorted(heap, reverse=True)]   # smallest key first
    if not records:
        return np.zeros((0, seq_len + 1), np.int32)
    spec = {FEATURE: tf.io.FixedLenFeature([seq_len + 1], tf.int64)}
    return tf.cast(tf.io.parse_example(records, spec)[FEATURE], tf.int32).numpy()


def compressor_bits_per_byte(text: bytes) -> dict:
    """Bits per byte of zlib (level 9) and lzma (preset 9) on `text`: the yardstick users know
    (gzip / xz). Standard library, one call each: nothing to hand-write."""
    size = max(len(text), 1)
    return {"zlib9_bits_per_byte": 8.0 * len(zlib.compress(text, 9)) / size,
            "lzma9_bits_per_byte": 8.0 * len(lzma.compress(text, preset=9)) / size,
            "compressor_text_bytes": len(text)}


def sample_text_bytes(sample: np.ndarray, byte_ids: int = 256) -> bytes:
    """The raw bytes under a byte-tokenizer sample's targets (ids < 256; specials dropped),
    sequence after sequence: the text the compressors see."""
    return b"".join(row[1:][row[1:] < byte_ids].astype(np.uint8).tobytes() for row in sample)


def latency_ms(logits_fn: Callable, ids: np.ndarray, repeats: int = 5) -> float:
    """Median wall time (ms) of logits_fn on ids (one eval batch, batch_size x seq_len), after
    one warm-up call."""
    import time
    np_logits = logits_fn(ids)                                          # warm-up
    del np_logits
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = logits_fn(ids)
        _ = out.numpy() if hasattr(out, "numpy") else out
        times.append((time.perf_counter() - start) * 1000.0)
    return float(sorted(times)[len(times) // 2])
