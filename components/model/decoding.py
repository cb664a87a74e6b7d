"""Cached decoding for GPT: per-layer keys and values, one new position per generated token.

Shapes: B = batch, S = positions computed in this call (T for a prefill, 1 for a step),
T = context_length = cache slots, H = heads, KV = key/value heads (gpt2: H; llama: n_kv_head),
D = head dim, C = d_model, V = vocab.
Cache: one (keys, values) pair per layer, each (B, KV, T, D) in the layer's compute dtype.

The arithmetic is GPT.call -> block.call -> attention.call's (same sublayers, same casts, the
one attention function `layers.attend`); only where keys/values come from differs. Written beside
the model instead of inside it so the training path stays untouched; the test that greedy cached
decoding equals full-window decoding token for token pins the two paths together.

Slots and positions. A slot is where a key sits in the cache; a position is what the model saw
(gpt2: the position table's row; llama: the rotary angle, applied to the key once, when it is
written). Until a row's window is full they are equal. Past the window:
  gpt2 (can_slide false): positions must stay < T, so the caller re-prefills a shortened window
      (refill_rows; positions restart at 0).
  llama (can_slide true): the cache SLIDES one slot per new token. slide(cache, rows) drops the
      oldest slot of those rows and frees the last one; the new token is then written at slot
      T - 1 with its absolute position p (step(..., position=p, slot=T - 1)); positions keep
      counting, slots stay < T. What this computes, exactly (up to float rounding; tests/model/
      test_decoding.py against an independent NumPy model): the whole sequence with
      sliding-window attention in every layer, query p seeing keys p - T < j <= p
      (sliding_window_logits, Mistral's rolling buffer). It is NOT a recomputation of the last T
      tokens alone: a kept key of layer 2+ was computed while its token still saw the dropped
      ones (equal only for one layer). Rotary scores depend on position differences only, so
      absolute positions past T are no problem; keep them below ~2^16 (float32 angles
      p x theta^(-2i/D) then still resolve 1e-3 rad).
A server loop for llama, per row: `filled` slots (<= T) and `position` (the next token's):
      full = filled >= T                      (and the row still decoding)
      cache = slide(cache, full);  filled = where(full, T - 1, filled)
      logits, cache = step(model, token, position, cache, slot=filled)   # or step_rows(..., slot=)
      filled += 1;  position += 1
"""

from __future__ import annotations

import tensorflow as tf



def _forward(model, ids, positions, attend):
    """ids, positions (B, S) -> logits (B, S, V) float32, new cache. attend(layer, k, v) returns
    the keys/values to attend over, (B, H, T, D) each, and a visibility mask (B, 1, S, T)."""
    x = model.token_embedding(ids)                                          # (B, S, C) float32
    if model.position_embedding is not None:
        x = x + model.position_embedding(positions)
    cache = []
    for index, block in enumerate(model.blocks):
        compute, attn = block.dtype_policy.compute_dtype, block.attn
        q, k, v = attn.split_heads(tf.cast(block.ln1(x), compute), positions)  # (B, H|KV, S, D)
        keys, values, visible = attend(index, k, v)                       # (B, KV, T, D), (B, 1, S, T)
        x = x + tf.cast(attn.attend_and_merge(q, keys, values, visible), x.dtype)
        x = x + tf.cast(block.feed_forward(tf.cast(block.ln2(x), compute)), x.dtype)
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


def can_slide(model) -> bool:
    """True when the model's positions live in its keys (rotary): the cache may slide past the
    window (slide) instead of being re-filled (refill_rows)."""
    return model.position_embedding is None


def slide(cache, rows):
    """For the rows where rows (B,) is true: every layer's slots move one down (slot 0, the
    oldest key, is dropped) and the last slot is zeroed for the next write; the other rows are
    unchanged. Only for a model that can_slide (its keys carry their own positions)."""
    keep = rows[:, None, None, None]

    def shifted(t):
        return tf.concat([t[:, :, 1:], tf.zeros_like(t[:, :, :1])], axis=2)
    return tuple((tf.where(keep, shifted(k), k), tf.where(keep, shifted(v), v)) for k, v in cache)


def step(model, token, position, cache, slot=None):
    """One new token per row: token, position int32 (B,) -> (logits (B, V), cache with slot
    `slot` (default: `position`) of every layer overwritten by the token's key and value; the
    token sees slots <= slot). slot != position only after slide()."""
    slot = position if slot is None else slot
    slots = tf.shape(cache[0][0])[2]
    write = tf.one_hot(slot, slots, on_value=True, off_value=False)[:, None, :, None]    # (B,1,T,1)
    visible = (tf.range(slots)[None] <= slot[:, None])[:, None, None, :]                 # (B,1,1,T)

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


def sliding_window_logits(model, ids, window: int):
    """The uncached definition of a sliding cache: ids (B, N), any N, positions 0..N-1 ->
    logits (B, N, V) where every layer's query p attends to keys p - window < j <= p. Rotary
    models only (can_slide); O(N^2): a reference for tests and an uncached server path."""
    steps = tf.shape(ids)[1]
    offset = tf.range(steps)[:, None] - tf.range(steps)[None, :]
    band = ((offset >= 0) & (offset < window))[None, None]                        # (1, 1, N, N)
    positions = tf.broadcast_to(tf.range(steps)[None], tf.shape(ids))
    return _forward(model, ids, positions, lambda i, k, v: (k, v, band))[0]


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


def step_rows(model, token, position, cache, rows, slot=None):
    """step() for the rows where rows (B,) is true only: ended rows cost a gather and a scatter
    of their cache, not a forward pass. Their logits come back as zeros (never used)."""
    index = tf.where(rows)                                                  # (n, 1)
    sub_cache = tuple((tf.gather_nd(k, index), tf.gather_nd(v, index)) for k, v in cache)
    slot = None if slot is None else tf.gather_nd(slot, index)
    logits, fresh = step(model, tf.gather_nd(token, index), tf.gather_nd(position, index), sub_cache,
                         slot)
    shape = tf.concat([tf.shape(token, out_type=tf.int64), tf.shape(logits, out_type=tf.int64)[1:]], 0)
    full_logits = tf.scatter_nd(index, logits, shape)
    return full_logits, tuple((tf.tensor_scatter_nd_update(k, index, nk), tf.tensor_scatter_nd_update(v, index, nv))
                              for (nk, nv), (k, v) in zip(fresh, cache))
