"""A decoder-only Transformer (GPT) in Keras 3, built from ModelConfig.

Shapes: B = batch, T = sequence length (<= context), C = d_model, H = heads, D = C / H.
Pre-LayerNorm blocks: x = x + Attn(LN(x)); x = x + MLP(LN(x)). Under a mixed precision policy
the matmuls run in float16/bfloat16 while the variables, the LayerNorms, the softmax of the
attention and the logits stay float32 (logits feed the loss; low-precision logits lose the tail).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from components.text_example_gen import tokenizer


class CausalSelfAttention(keras.layers.Layer):
    def __init__(self, d_model: int, n_head: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.qkv = keras.layers.Dense(3 * d_model, name="qkv", dtype=self.dtype_policy)
        self.proj = keras.layers.Dense(d_model, name="proj", dtype=self.dtype_policy)
        self.attn_dropout = keras.layers.Dropout(dropout)
        self.resid_dropout = keras.layers.Dropout(dropout)

    def call(self, x, training=False):
        batch, steps = tf.shape(x)[0], tf.shape(x)[1]
        qkv = self.qkv(x)                                               # (B, T, 3C)
        qkv = tf.reshape(qkv, [batch, steps, 3, self.n_head, self.head_dim])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))        # each (B, H, T, D)
        scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(self.head_dim)  # (B, H, T, T)
        # Position t may attend to positions <= t only: mask the upper triangle before softmax.
        causal = tf.linalg.band_part(tf.ones([steps, steps], tf.bool), -1, 0)
        scores = tf.where(causal, tf.cast(scores, tf.float32), -1e9)   # softmax in float32
        weights = self.attn_dropout(tf.nn.softmax(scores, axis=-1), training=training)
        out = tf.matmul(tf.cast(weights, v.dtype), v)                   # (B, H, T, D)
        out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, steps, -1])  # (B, T, C)
        return self.resid_dropout(self.proj(out), training=training)


class Block(keras.layers.Layer):
    def __init__(self, d_model: int, n_head: int, mlp_ratio: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        policy = self.dtype_policy
        self.ln1 = keras.layers.LayerNormalization(epsilon=1e-5, name="ln1", dtype="float32")
        self.attn = CausalSelfAttention(d_model, n_head, dropout, name="attn", dtype=policy)
        self.ln2 = keras.layers.LayerNormalization(epsilon=1e-5, name="ln2", dtype="float32")
        self.fc = keras.layers.Dense(mlp_ratio * d_model, activation="gelu", name="fc", dtype=policy)
        self.fc_out = keras.layers.Dense(d_model, name="fc_out", dtype=policy)
        self.dropout = keras.layers.Dropout(dropout)

    def call(self, x, training=False):
        compute = self.dtype_policy.compute_dtype
        x = x + tf.cast(self.attn(tf.cast(self.ln1(x), compute), training=training), x.dtype)
        h = self.fc_out(self.fc(tf.cast(self.ln2(x), compute)))
        return x + tf.cast(self.dropout(h, training=training), x.dtype)


class GPT(keras.Model):
    """ids (B, T) int -> next-token logits (B, T, vocab) float32. T <= context_length."""

    def __init__(self, *, context_length: int, n_layer: int, n_head: int, d_model: int,
                 mlp_ratio: int = 4, dropout: float = 0.0, tie_embeddings: bool = True,
                 vocab_size: int = tokenizer.VOCAB_SIZE, dtype: str = "float32", **kwargs):
        super().__init__(dtype=dtype, **kwargs)
        self.context_length, self.vocab_size = context_length, vocab_size
        self.tie_embeddings = tie_embeddings
        init = keras.initializers.RandomNormal(stddev=0.02)
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model, embeddings_initializer=init,
                                                      name="token_embedding", dtype="float32")
        self.position_embedding = keras.layers.Embedding(context_length, d_model,
                                                         embeddings_initializer=init,
                                                         name="position_embedding", dtype="float32")
        self.dropout = keras.layers.Dropout(dropout)
        self.blocks = [Block(d_model, n_head, mlp_ratio, dropout, name=f"block_{i}", dtype=dtype)
                       for i in range(n_layer)]
        self.ln_f = keras.layers.LayerNormalization(epsilon=1e-5, name="ln_f", dtype="float32")
        self.head = None if tie_embeddings else keras.layers.Dense(
            vocab_size, use_bias=False, kernel_initializer=init, name="head", dtype="float32")

    def call(self, ids, training=False):
        steps = tf.shape(ids)[1]
        # The residual stream stays float32; each block casts to the compute dtype inside.
        x = self.token_embedding(ids) + self.position_embedding(tf.range(steps))[tf.newaxis]
        x = self.dropout(x, training=training)                          # (B, T, C) float32
        for block in self.blocks:
            x = block(x, training=training)
        x = self.ln_f(x)
        if self.head is None:  # tied: logits = x @ E^T, in float32
            return tf.matmul(x, self.output_embedding(), transpose_b=True)
        return self.head(x)                                             # (B, T, vocab) float32

    def output_embedding(self):
        """The tied output head's matrix E (vocab, C) in float32. After model.quantize("int8") the
        embedding variable holds int8 codes with a per-row scale: read it dequantized (the raw
        codes would put logits off by ~1e3)."""
        layer = self.token_embedding
        if getattr(layer, "quantization_mode", None) == "int8":
            return tf.cast(layer._embeddings, tf.float32) / tf.cast(layer.embeddings_scale, tf.float32)[:, None]
        return tf.cast(layer.embeddings, tf.float32)


def build_model(model_config, context_length: int, precision: str = "float32") -> GPT:
    """A built (weights created) GPT for a config; `precision` is a Keras dtype policy name."""
    model = GPT(context_length=context_length, n_layer=model_config.n_layer,
                n_head=model_config.n_head, d_model=model_config.d_model,
                mlp_ratio=model_config.mlp_ratio, dropout=model_config.dropout,
                tie_embeddings=model_config.tie_embeddings, dtype=precision, name=model_config.name)
    model(tf.zeros([1, context_length], tf.int32))
    return model


def parameter_count(model: keras.Model) -> int:
    return int(sum(math.prod(v.shape) for v in model.trainable_variables))


def flops_per_token(model_config, context_length: int, n_params: int) -> int:
    """Training FLOPs per token (forward + backward = 3 x forward): 6 N for the weight matmuls
    plus 6 x n_layer x T x C for attention scores and weighted sums (Kaplan et al. 2020, C.1)."""
    return int(6 * n_params + 6 * model_config.n_layer * context_length * model_config.d_model)
