"""The pieces both decoder blocks share (gpt.py: GPT-2's; llama.py: the modern one): the causal
mask, stateless dropout, the one attention function, the initializer, RMSNorm and rotary
position embedding.

Shapes: B = batch, H = heads, T (Tq, Tk) = positions, D = head dim.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf


def causal_mask(query_steps, key_steps):
    """bool (Tq, Tk): query i (the last Tq of Tk positions) may attend to keys <= its position.
    Tq == Tk in training; a cached decode step has Tq < Tk."""
    offset = key_steps - query_steps
    rows = tf.range(query_steps)[:, None] + offset
    return rows >= tf.range(key_steps)[None, :]


def stateless_dropout(x, rate: float, seed):
    """Inverted dropout whose mask is a pure function of `seed` (int32/int64 [2]): the same seed
    gives the same mask, so a recomputed block (remat) and a resumed run draw what the original
    drew, and the seed (derived from the step counter, replica and layer) needs no checkpointing."""
    keep = tf.random.stateless_uniform(tf.shape(x), seed=seed, dtype=tf.float32) >= rate
    return tf.where(keep, x / tf.cast(1.0 - rate, x.dtype), tf.zeros_like(x))


def attend(q, k, v, mask, *, dropout_rate: float = 0.0, seed=None):
    """Scaled dot-product attention; the one copy of the math (training and cached decoding).
    q (B, H, Tq, D), k and v (B, H, Tk, D) in the compute dtype, mask bool broadcastable to
    (B, H, Tq, Tk). Scores are formed in the compute dtype with q pre-scaled (a (Tq, D) multiply
    instead of (Tq, Tk)), then made float32 once for the masked softmax; the weights go back to
    the compute dtype for the second matmul. Returns (B, H, Tq, D). Leading dimensions
    broadcast: grouped-query attention passes q (B, KV, G, Tq, D) against k, v (B, KV, 1, Tk, D)."""
    q = q * tf.cast(1.0 / math.sqrt(q.shape[-1]), q.dtype)
    scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)   # (B, H, Tq, Tk)
    weights = tf.nn.softmax(tf.where(mask, scores, -1e9), axis=-1)
    if seed is not None and dropout_rate > 0:
        weights = stateless_dropout(weights, dropout_rate, seed)
    return tf.matmul(tf.cast(weights, v.dtype), v)


def attend_with_dropout(attention, q, k, v, mask, training, seed):
    """An attention layer's training-time call after its head split, shared by both blocks:
    attention.attend_and_merge(q, k, v, mask) with two dropout seeds folded from `seed` (0: the
    attention weights, 1: the projected output), none without training or a seed. The caller
    builds the mask (its own causal_mask), so a block's masking stays its own."""
    seeds = (None, None) if seed is None or not training else (
        tf.random.experimental.stateless_fold_in(seed, 0),
        tf.random.experimental.stateless_fold_in(seed, 1))
    out = attention.attend_and_merge(q, k, v, mask, seed=seeds[0])
    return out if seeds[1] is None or not attention.rate else stateless_dropout(out, attention.rate, seeds[1])


def normal(stddev: float):
    return keras.initializers.RandomNormal(stddev=stddev)


class RMSNorm(keras.layers.Layer):
    """x / sqrt(mean(x^2) + eps) * scale over the last axis, computed in float32 whatever the
    input dtype (returns float32). One variable, `scale` (ones at init), never weight-decayed."""

    def __init__(self, epsilon: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        # autocast=False: read in float32 even inside a bf16 autocast scope (as LayerNorm's).
        self.scale = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="scale",
                                     autocast=False)

    def call(self, x):
        x = tf.cast(x, tf.float32)
        inverse = tf.math.rsqrt(tf.reduce_mean(tf.square(x), axis=-1, keepdims=True) + self.epsilon)
        return x * inverse * tf.convert_to_tensor(self.scale, tf.float32)


# Rotary position embedding, the HF/Llama "rotate_half" convention: a head vector's dimension i
# (i < D/2) is paired with dimension i + D/2 (not with its neighbour, as the GPT-J/Meta
# interleaved form pairs them), and the pair turns by the angle position x theta^(-2i/D):
#   out[:D/2] = x[:D/2] cos - x[D/2:] sin,   out[D/2:] = x[D/2:] cos + x[:D/2] sin.
# HF's LlamaAttention computes exactly this (cos/sin = cat(freqs, freqs)), so q/k kernels map to
# q_proj/k_proj column for column without a permutation.

def rotary_angles(positions, head_dim: int, theta: float):
    """positions int (..., T) -> (cos, sin), each float32 (..., T, D), halves repeated."""
    inverse_frequency = 1.0 / (theta ** (tf.range(0, head_dim, 2, dtype=tf.float32) / head_dim))
    angles = tf.cast(positions, tf.float32)[..., None] * inverse_frequency      # (..., T, D/2)
    angles = tf.concat([angles, angles], axis=-1)
    return tf.cos(angles), tf.sin(angles)


def apply_rotary(x, cos, sin):
    """x (B, H, T, D) in any float dtype, cos/sin broadcastable to it: rotated in float32, returned
    in x's dtype (bf16 angles would be off by ~1e-2 at position 1000)."""
    x32 = tf.cast(x, tf.float32)
    first, second = tf.split(x32, 2, axis=-1)
    rotated = tf.concat([-second, first], axis=-1)                              # rotate_half
    return tf.cast(x32 * cos + rotated * sin, x.dtype)
