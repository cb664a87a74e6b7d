"""The modern decoder block (`model.arch=llama`): rotary positions, RMSNorm, SwiGLU MLP,
grouped-query attention, no biases; optional QK-norm.

Shapes: B = batch, T = positions, C = d_model, H = query heads, KV = key/value heads (divides H),
G = H / KV query heads per key/value head, D = C / H, F = MLP hidden width.

Same mixed-precision contract as GPT-2's Block (gpt.py): float32 variables and residual stream,
norms in float32, the matmuls in the compute dtype; rotary angles and the rotation in float32.
Layouts chosen so an HF Llama export is a split of columns, no permutation:
  qkv kernel (C, (H + 2 KV) D): [q heads | k heads | v heads], head h in columns h D .. h D + D;
  query head h reads key/value head h // G (HF's repeat_kv);
  fc kernel (C, 2F): [gate | up], out = fc_out(silu(gate) * up).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from components.model.layers import (RMSNorm, apply_rotary, attend, attend_with_dropout,
                                     causal_mask, normal,
                                     rotary_angles, stateless_dropout)

class GroupedQueryAttention(keras.layers.Layer):
    def __init__(self, d_model: int, n_head: int, n_kv_head: int, dropout: float, *,
                 rope_theta: float, qk_norm: bool, norm_eps: float, proj_std: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, d_model // n_head
        self.rate, self.rope_theta = dropout, rope_theta
        width = (n_head + 2 * n_kv_head) * self.head_dim
        self.qkv = keras.layers.Dense(width, use_bias=False, kernel_initializer=normal(0.02),
                                      name="qkv", dtype=self.dtype_policy)
        self.proj = keras.layers.Dense(d_model, use_bias=False, kernel_initializer=normal(proj_std),
                                       name="proj", dtype=self.dtype_policy)
        # QK-norm: one RMSNorm scale (D,) for all query heads, one for all key heads (Qwen3, OLMo).
        self.q_norm = RMSNorm(norm_eps, name="q_norm", dtype="float32") if qk_norm else None
        self.k_norm = RMSNorm(norm_eps, name="k_norm", dtype="float32") if qk_norm else None

    def build(self, input_shape):                                       # (B, T, C)
        self.qkv.build(input_shape)
        self.proj.build((*input_shape[:-1], self.n_head * self.head_dim))
        for norm in (self.q_norm, self.k_norm):
            if norm is not None:
                norm.build((None, None, None, self.head_dim))            # (B, H, T, D)

    def split_heads(self, x, positions):
        """x (B, T, C) compute dtype, positions int (1 or B, T) -> q (B, H, T, D), k and v
        (B, KV, T, D), compute dtype; q and k QK-normed (if on) and rotated at `positions`."""
        batch, steps, d = tf.shape(x)[0], tf.shape(x)[1], self.head_dim
        heads = tf.reshape(self.qkv(x), [batch, steps, self.n_head + 2 * self.n_kv_head, d])
        heads = tf.transpose(heads, [0, 2, 1, 3])                          # (B, H + 2 KV, T, D)
        q, k, v = tf.split(heads, [self.n_head, self.n_kv_head, self.n_kv_head], axis=1)
        if self.q_norm is not None:
            q, k = tf.cast(self.q_norm(q), q.dtype), tf.cast(self.k_norm(k), k.dtype)
        cos, sin = rotary_angles(positions, d, self.rope_theta)           # (1 or B, T, D)
        cos, sin = cos[:, None], sin[:, None]                              # head axis
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v

    def attend_and_merge(self, q, k, v, mask, *, seed=None):
        """q (B, H, Tq, D), k and v (B, KV, Tk, D), mask broadcastable to (B, 1, Tq, Tk) ->
        the output projection (B, Tq, C). Query head h = kv x G + g reads key/value head kv:
        the G heads of a group share one k/v (broadcast, never copied G times)."""
        batch, steps, groups = tf.shape(q)[0], tf.shape(q)[2], self.n_head // self.n_kv_head
        grouped = tf.reshape(q, [batch, self.n_kv_head, groups, steps, self.head_dim])
        mask = mask[..., None, :, :] if mask.shape.rank == 4 else mask    # (B, 1, 1, Tq, Tk)
        out = attend(grouped, k[:, :, None], v[:, :, None], mask, dropout_rate=self.rate, seed=seed)
        out = tf.reshape(out, [batch, self.n_head, steps, self.head_dim])
        return self.proj(tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, steps, -1]))

    def call(self, x, training=False, seed=None):
        steps = tf.shape(x)[1]
        q, k, v = self.split_heads(x, tf.range(steps)[None])
        return attend_with_dropout(self, q, k, v, causal_mask(steps, steps), training, seed)


class LlamaBlock(keras.layers.Layer):
    """Pre-norm block on the float32 residual stream (autocast=False: see gpt.Block). ln1/ln2 are
    RMSNorms; named as GPT-2's so decoding and the pipeline stages address both blocks alike."""

    def __init__(self, d_model: int, n_head: int, n_kv_head: int, hidden: int, dropout: float, *,
                 rope_theta: float, qk_norm: bool, norm_eps: float, residual_std: float = 0.02,
                 **kwargs):
        super().__init__(autocast=False, **kwargs)
        policy = self.dtype_policy
        self.rate, self.hidden = dropout, hidden
        self.ln1 = RMSNorm(norm_eps, name="ln1", dtype="float32")
        self.attn = GroupedQueryAttention(d_model, n_head, n_kv_head, dropout, rope_theta=rope_theta,
                                          qk_norm=qk_norm, norm_eps=norm_eps, proj_std=residual_std,
                                          name="attn", dtype=policy)
        self.ln2 = RMSNorm(norm_eps, name="ln2", dtype="float32")
        self.fc = keras.layers.Dense(2 * hidden, use_bias=False, name="fc",
                                     kernel_initializer=normal(0.02), dtype=policy)
        self.fc_out = keras.layers.Dense(d_model, use_bias=False, name="fc_out",
                                         kernel_initializer=normal(residual_std), dtype=policy)

    def build(self, input_shape):                                       # (B, T, C)
        for layer in (self.ln1, self.attn, self.ln2, self.fc):
            layer.build(input_shape)
        self.fc_out.build((*input_shape[:-1], self.hidden))

    def feed_forward(self, h):
        """SwiGLU: (B, T, C) compute dtype -> (B, T, C) compute dtype."""
        gate, up = tf.split(self.fc(h), 2, axis=-1)
        return self.fc_out(tf.nn.silu(gate) * up)

    def call(self, x, training=False, seed=None):                      # x (B, T, C) float32
        compute = self.dtype_policy.compute_dtype
        attn_seed = None if seed is None else tf.random.experimental.stateless_fold_in(seed, 0)
        x = x + tf.cast(self.attn(tf.cast(self.ln1(x), compute), training=training,
                                  seed=attn_seed), tf.float32)
        h = self.feed_forward(tf.cast(self.ln2(x), compute))
        if training and seed is not None and self.rate:
            h = stateless_dropout(h, self.rate, tf.random.experimental.stateless_fold_in(seed, 1))
        return x + tf.cast(h, tf.float32)
