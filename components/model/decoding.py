"""Cached decoding for GPT: per-layer keys and values, one new position per generated token.

Shapes: B = batch, S = positions computed in this call (T for a prefill, 1 for a step),
T = context_length = cache slots, H = heads, D = head dim, C = d_model, V = vocab.
Cache: one (keys, values) pair per layer, each (B, H, T, D) in the layer's compute dtype.

The arithmetic is GPT.call -> Block.call -> CausalSelfAttention.call's (same sublayers, same
casts, the one attention function `gpt.attend`); only where keys/values come from differs. Written
beside the model instead of inside it so the training path stays untouched; the test that greedy
cached decoding equals full-window decoding token for token pins the two paths together.
"""

from __future__ import annotations

import tensorflow as tf

from components.model import gpt


def _forward(model, ids, positions, attend):
    """ids, positions (B, S) -> logits (B, S, V) float32, new cache. attend(layer, k, v) returns
    the keys/values to attend over, (B, H, T, D) each, and a visibility mask (B, 1, S, T)."""
    x = model.token_embedding(ids) + model.position_embedding(positions)   # (B, S, C) float32
    cache = []
    for index, block in enumerate(model.blocks):
        compute, attn = block.dtype_policy.compute_dtype, block.attn
        q, k, v = attn.split_heads(tf.cast(block.ln1(x), compute))         # each (B, H, S, D)
        keys, values, visible = attend(index, k, v)                       # (B, H, T, D), (B, 1, S, T)
        x = x + tf.cast(attn.merge_heads(gpt.attend(q, keys, values, visible)), x.dtype)
        h = block.fc_out(block.fc(tf.cast(block.ln2(x), compute)))
        x = x + tf.cast(h, x.dtype)
        cache.append((keys, values))
    x = model.ln_f(x)
    if model.head is None:
        logits = tf.matmul(x, model.output_embedding(), transpose_b=True)
    else:
        logits = model.head(x)
    return tf.cast(logits, tf.float32), tuple(cache)


def prefill(model, window, lengths):
    """window int32 (B, T) right-padded, lengths (B,) -> (next-token logits (B, V) at position
    lengths - 1, cache). Slots >= length hold keys of padding; every later query masks them out
    (a step at position p sees slots <= p, and p = length when it writes slot length)."""
    steps = tf.shape(window)[1]
    positions = tf.broadcast_to(tf.range(steps)[None], tf.shape(window))
    causal = tf.linalg.band_part(tf.ones([steps, steps], tf.bool), -1, 0)[None, None]  # (1, 1, T, T)
    logits, cache = _forward(model, window, positions, lambda i, k, v: (k, v, causal))
    return tf.gather(logits, lengths - 1, batch_dims=1), cache


def step(model, token, position, cache):
    """One new token per row: token, position int32 (B,) -> (logits (B, V), cache with slot
    `position` of every layer overwritten by the token's key and value)."""
    slots = tf.shape(cache[0][0])[2]
    write = tf.one_hot(position, slots, on_value=True, off_value=False)[:, None, :, None]  # (B,1,T,1)
    visible = (tf.range(slots)[None] <= position[:, None])[:, None, None, :]             # (B,1,1,T)

    def attend(index, k, v):
        keys, values = cache[index]
        return tf.where(write, k, keys), tf.where(write, v, values), visible

    logits, cache = _forward(model, token[:, None], position[:, None], attend)
    return logits[:, 0], cache


def merge(take_new, new_cache, old_cache):
    """Per row: the new cache where take_new (B,) is true, else the old one."""
    pick = take_new[:, None, None, None]
    return tuple((tf.where(pick, nk, ok), tf.where(pick, nv, ov))
                 for (nk, nv), (ok, ov) in zip(new_cache, old_cache))


def refill_rows(model, window, lengths, rows, cache):
    """Re-fill the cache of the rows where rows (B,) is true from their windows; the other rows'
    caches are left as they are. Only those rows run the prefill: a batch whose rows slide at
    different steps pays one row's prefill per slide, not the whole batch's."""
    index = tf.where(rows)                                                  # (n, 1)
    _, fresh = prefill(model, tf.gather_nd(window, index), tf.gather_nd(lengths, index))
    return tuple((tf.tensor_scatter_nd_update(k, index, nk), tf.tensor_scatter_nd_update(v, index, nv))
                 for (nk, nv), (k, v) in zip(fresh, cache))


def ban(logits, ids):
    """logits (B, V) with the given ids set to -inf: never chosen by argmax, Gumbel-max or top-p,
    whatever the temperature (-inf / t stays -inf; a finite -1e9 / t = 1e9 does not)."""
    banned = tf.reduce_any(tf.equal(tf.range(tf.shape(logits)[-1])[:, None], ids[None]), -1)
    return tf.where(banned[None], tf.constant(-float("inf"), logits.dtype), logits)


def top_k_top_p(logits, top_k, top_p):
    """Per row: keep the top_k (B,) largest logits (0 = all) and, of those, the smallest set whose
    probability reaches top_p (B,) in (0, 1]; the rest become -inf. Ties at a threshold are kept."""
    vocab = tf.shape(logits)[-1]
    ordered = tf.sort(logits, axis=-1, direction="DESCENDING")                  # (B, V)
    k = tf.where(top_k > 0, tf.minimum(top_k, vocab), vocab)
    kth = tf.gather(ordered, k - 1, batch_dims=1)                                # (B,)
    ordered = tf.where(tf.range(vocab)[None] < k[:, None], ordered, -float("inf"))
    before = tf.cumsum(tf.nn.softmax(ordered, axis=-1), axis=-1, exclusive=True)  # mass of better ids
    kept = tf.reduce_sum(tf.cast(before < top_p[:, None], tf.int32), axis=-1)    # >= 1: before[0] = 0
    pth = tf.gather(ordered, tf.minimum(kept, k) - 1, batch_dims=1)
    threshold = tf.maximum(kth, pth)[:, None]
    return tf.where(logits >= threshold, logits, -float("inf"))


def step_rows(model, token, position, cache, rows):
    """step() for the rows where rows (B,) is true only: ended rows cost a gather and a scatter
    of their cache, not a forward pass. Their logits come back as zeros (never used)."""
    index = tf.where(rows)                                                  # (n, 1)
    sub_cache = tuple((tf.gather_nd(k, index), tf.gather_nd(v, index)) for k, v in cache)
    logits, fresh = step(model, tf.gather_nd(token, index), tf.gather_nd(position, index), sub_cache)
    shape = tf.concat([tf.shape(token, out_type=tf.int64), tf.shape(logits, out_type=tf.int64)[1:]], 0)
    full_logits = tf.scatter_nd(index, logits, shape)
    return full_logits, tuple((tf.tensor_scatter_nd_update(k, index, nk), tf.tensor_scatter_nd_update(v, index, nv))
                              for (nk, nv), (k, v) in zip(fresh, cache))
