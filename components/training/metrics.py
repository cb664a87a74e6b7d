"""Language-model metrics over the eval split, for any logits function (an in-memory Keras model
during training, the exported SavedModel's `token_logits` signature in the Evaluator)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import tensorflow as tf

from components.tokenizer.byte_level import PAD_ID
from components.training import input as input_lib
from components.training.train_step import masked_token_loss_sum


def evaluate_logits_fn(logits_fn: Callable, eval_files, seq_len: int, batch_size: int,
                       max_batches: int, in_graph: bool = True, pad_id: int = PAD_ID,
                       token_bytes=None) -> dict:
    """Loss (nats/token), perplexity and next-token accuracy over non-pad targets, plus example
    and token counts, on the first max_batches batches of the eval split (no shuffling: every
    model is measured on the same sequences). in_graph=False: logits_fn is plain Python (the
    TFLite Interpreter) and runs outside the tf.function. "batches" holds each batch's
    [loss sum, correct, tokens, bytes] in order: two models' rows pair up batch by batch (the
    Evaluator's paired variant deltas)."""
    # Raw UTF-8 bytes each id stands for (Tokenizer.token_byte_lengths; default: the byte
    # tokenizer's), so bits per byte = total nats / bytes under the targets / ln 2 compares
    # models with different tokenizers.
    if token_bytes is None:
        from components.tokenizer.byte_level import ByteTokenizer
        token_bytes = ByteTokenizer().token_byte_lengths()
    byte_table = tf.constant(np.asarray(token_bytes, np.float32))
    dataset = input_lib.make_dataset(eval_files, seq_len, batch_size, repeat=False)
    if max_batches > 0:
        dataset = dataset.take(max_batches)

    @tf.function
    def batch_stats(inputs, targets, logits=None):
        logits = tf.cast(logits_fn(inputs) if logits is None else logits, tf.float32)  # (B, T, V)
        mask = tf.cast(tf.not_equal(targets, pad_id), tf.float32)                 # (B, T)
        hit = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), targets), tf.float32)
        raw_bytes = tf.reduce_sum(tf.gather(byte_table, targets) * mask)
        return (masked_token_loss_sum(targets, logits, pad_id), tf.reduce_sum(hit * mask),
                tf.reduce_sum(mask), raw_bytes)

    rows, examples = [], 0
    for inputs, targets in dataset:
        stats = batch_stats(inputs, targets) if in_graph else batch_stats(
            inputs, targets, tf.constant(logits_fn(inputs.numpy())))
        rows.append([float(x) for x in stats])
        examples += int(inputs.shape[0])
    loss_sum, correct, tokens, total_bytes = (sum(column) for column in zip(*rows)) if rows else (0.0,) * 4
    if not tokens:
        raise ValueError(f"no eval tokens in {eval_files!r} (eval split smaller than one batch of "
                         f"{batch_size}?)")
    loss = loss_sum / tokens
    return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "accuracy": correct / tokens,
            "examples": examples, "tokens": int(tokens),
            "bits_per_byte": loss_sum / max(total_bytes, 1.0) / math.log(2),
            "eval_bytes": int(total_bytes), "batches": rows}


def latency_ms(logits_fn: Callable, eval_files, seq_len: int, batch_size: int, repeats: int = 5) -> float:
    """Median wall time (ms) of logits_fn on the first eval batch (batch_size x seq_len), after
    one warm-up call."""
    import time
    inputs, _ = next(iter(input_lib.make_dataset(eval_files, seq_len, batch_size, repeat=False)))
    ids = inputs.numpy()
    np_logits = logits_fn(ids)                                          # warm-up
    del np_logits
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = logits_fn(ids)
        _ = out.numpy() if hasattr(out, "numpy") else out
        times.append((time.perf_counter() - start) * 1000.0)
    return float(sorted(times)[len(times) // 2])
