"""A decoder-only Transformer (GPT) in Keras 3, built from ModelConfig.

Shapes: B = batch, T = sequence length (<= context), C = d_model, H = heads, D = C / H.
Pre-LayerNorm blocks: x = x + Attn(LN(x)); x = x + MLP(LN(x)). Under a mixed precision policy
the matmuls run in float16/bfloat16 while the variables, the residual stream x, the LayerNorms,
the softmax of the attention and the logits stay float32 (logits feed the loss; low-precision
logits lose the tail; a bf16 residual stream rounds small updates away at depth).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
# Keras 3 exports no public way to leave a layer's autocast scope; the one it opens itself.
from keras.src.backend import AutocastScope

from components.config.tree import REMAT_MODES
from components.tokenizer.byte_level import VOCAB_SIZE


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
    the compute dtype for the second matmul. Returns (B, H, Tq, D)."""
    q = q * tf.cast(1.0 / math.sqrt(q.shape[-1]), q.dtype)
    scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)   # (B, H, Tq, Tk)
    weights = tf.nn.softmax(tf.where(mask, scores, -1e9), axis=-1)
    if seed is not None and dropout_rate > 0:
        weights = stateless_dropout(weights, dropout_rate, seed)
    return tf.matmul(tf.cast(weights, v.dtype), v)


def _normal(stddev: float):
    return keras.initializers.RandomNormal(stddev=stddev)


class CausalSelfAttention(keras.layers.Layer):
    def __init__(self, d_model: int, n_head: int, dropout: float, proj_std: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.n_head, self.head_dim, self.rate = n_head, d_model // n_head, dropout
        self.qkv = keras.layers.Dense(3 * d_model, kernel_initializer=_normal(0.02), name="qkv",
                                      dtype=self.dtype_policy)
        self.proj = keras.layers.Dense(d_model, kernel_initializer=_normal(proj_std), name="proj",
                                       dtype=self.dtype_policy)

    def split_heads(self, x):
        """(B, T, C) compute dtype -> q, k, v each (B, H, T, D)."""
        batch, steps = tf.shape(x)[0], tf.shape(x)[1]
        qkv = tf.reshape(self.qkv(x), [batch, steps, 3, self.n_head, self.head_dim])
        return tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))

    def merge_heads(self, out):
        """(B, H, T, D) -> output projection (B, T, C)."""
        batch, steps = tf.shape(out)[0], tf.shape(out)[2]
        return self.proj(tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, steps, -1]))

    def call(self, x, training=False, seed=None):
        q, k, v = self.split_heads(x)
        steps = tf.shape(x)[1]
        seeds = (None, None) if seed is None or not training else (
            tf.random.experimental.stateless_fold_in(seed, 0),
            tf.random.experimental.stateless_fold_in(seed, 1))
        out = self.merge_heads(attend(q, k, v, causal_mask(steps, steps), dropout_rate=self.rate,
                                      seed=seeds[0]))
        return out if seeds[1] is None or not self.rate else stateless_dropout(out, self.rate, seeds[1])


class Block(keras.layers.Layer):
    """Pre-LN block on the float32 residual stream. autocast=False: Keras would otherwise cast the
    float32 stream to the compute dtype on entry (the residual adds would then run in bf16 and
    small updates round away at depth); the sublayers cast their own inputs."""

    def __init__(self, d_model: int, n_head: int, mlp_ratio: int, dropout: float,
                 residual_std: float = 0.02, **kwargs):
        super().__init__(autocast=False, **kwargs)
        policy = self.dtype_policy
        self.rate = dropout
        self.ln1 = keras.layers.LayerNormalization(epsilon=1e-5, name="ln1", dtype="float32")
        self.attn = CausalSelfAttention(d_model, n_head, dropout, residual_std, name="attn",
                                        dtype=policy)
        self.ln2 = keras.layers.LayerNormalization(epsilon=1e-5, name="ln2", dtype="float32")
        self.fc = keras.layers.Dense(mlp_ratio * d_model, activation="gelu", name="fc",
                                     kernel_initializer=_normal(0.02), dtype=policy)
        self.fc_out = keras.layers.Dense(d_model, name="fc_out",
                                         kernel_initializer=_normal(residual_std), dtype=policy)

    def call(self, x, training=False, seed=None):                      # x (B, T, C) float32
        compute = self.dtype_policy.compute_dtype
        attn_seed = None if seed is None else tf.random.experimental.stateless_fold_in(seed, 0)
        x = x + tf.cast(self.attn(tf.cast(self.ln1(x), compute), training=training,
                                  seed=attn_seed), tf.float32)
        h = self.fc_out(self.fc(tf.cast(self.ln2(x), compute)))          # (B, T, C) compute
        if training and seed is not None and self.rate:
            h = stateless_dropout(h, self.rate, tf.random.experimental.stateless_fold_in(seed, 1))
        return x + tf.cast(h, tf.float32)


class GPT(keras.Model):
    """ids (B, T) int -> next-token logits (B, T, vocab) float32. T <= context_length.

    Dropout is stateless: call(ids, training=True, seed=int[2]) draws every mask from `seed`
    (the train step derives it from the step counter, replica and micro-batch). Without a seed
    (e.g. Keras fit) a random one is drawn per call. remat="blocks" recomputes each block in the
    backward pass (tf.recompute_grad; same seed, so the same dropout masks)."""

    def __init__(self, *, context_length: int, n_layer: int, n_head: int, d_model: int,
                 mlp_ratio: int = 4, dropout: float = 0.0, tie_embeddings: bool = True,
                 vocab_size: int = VOCAB_SIZE, dtype: str = "float32",
                 remat: str = "none", **kwargs):
        super().__init__(dtype=dtype, **kwargs)
        if remat not in REMAT_MODES:
            raise ValueError(f"remat {remat!r} is not one of {REMAT_MODES}")
        self.context_length, self.vocab_size = context_length, vocab_size
        self.tie_embeddings, self.rate, self.remat = tie_embeddings, dropout, remat
        # GPT-2 initialization: N(0, 0.02) everywhere, N(0, 0.02 / sqrt(2 n_layer)) for the two
        # projections that add into the residual stream (2 per block), so its variance at the
        # top does not grow with depth. Biases start at zero, LayerNorms at (1, 0).
        residual_std = 0.02 / math.sqrt(2 * n_layer)
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model, embeddings_initializer=_normal(0.02),
                                                      name="token_embedding", dtype="float32")
        self.position_embedding = keras.layers.Embedding(context_length, d_model,
                                                         embeddings_initializer=_normal(0.02),
                                                         name="position_embedding", dtype="float32")
        self.blocks = [Block(d_model, n_head, mlp_ratio, dropout, residual_std, name=f"block_{i}",
                             dtype=dtype) for i in range(n_layer)]
        self.ln_f = keras.layers.LayerNormalization(epsilon=1e-5, name="ln_f", dtype="float32")
        self.head = None if tie_embeddings else keras.layers.Dense(
            vocab_size, use_bias=False, kernel_initializer=_normal(0.02), name="head", dtype="float32")

    def call(self, ids, training=False, seed=None):
        seed = self.dropout_seed(training, seed)
        x = self.embed(ids, training, seed)
        for index in range(len(self.blocks)):
            x = self.apply_block(index, x, training, seed)
        return self.project(x)

    # The pieces of call(), also run one pipeline stage at a time (training/pipeline_stages.py).
    def dropout_seed(self, training, seed):
        """The call's seed: None without dropout (no RNG ops), a random one when none is given."""
        if not training or not self.rate:
            return None
        return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32) if seed is None else seed

    def embed(self, ids, training, seed):
        """ids (B, T) -> the float32 residual stream (B, T, C); each block casts inside."""
        steps = tf.shape(ids)[1]
        x = self.token_embedding(ids) + self.position_embedding(tf.range(steps))[tf.newaxis]
        if seed is not None:
            x = stateless_dropout(x, self.rate, tf.random.experimental.stateless_fold_in(seed, 0))
        return x

    def apply_block(self, index, x, training, seed):
        block = self.blocks[index]
        block_seed = None if seed is None else tf.random.experimental.stateless_fold_in(seed, index + 1)
        if training and self.remat == "blocks":
            # Only the block's input is kept; its activations are recomputed in the backward
            # pass (keras.RematScope is broken on the TF backend, keras-team/keras#21207).
            return tf.recompute_grad(
                lambda h, block=block, s=block_seed: block(h, training=True, seed=s))(x)
        return block(x, training=training, seed=block_seed)

    def project(self, x):
        """Final LayerNorm and output head: (B, T, C) -> logits (B, T, vocab) float32."""
        x = self.ln_f(x)
        if self.head is None:  # tied: logits = x @ E^T, in float32
            return tf.matmul(x, self.output_embedding(), transpose_b=True)
        return self.head(x)

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        """Keras 3 hands its tracked list `blocks` to SavedModel only: a tf.train.Checkpoint of
        the model would miss every block variable (kept, if at all, positionally under the
        optimizer; frozen blocks in no checkpoint). Checkpoints get them under the same path the
        SavedModel walk uses (`blocks/<i>/...`)."""
        children = super()._trackable_children(save_type, **kwargs)
        if save_type == "checkpoint" and "blocks" not in children:
            wrapped = self.__dict__.get("_checkpoint_blocks")
            if wrapped is None or list(wrapped) != list(self.blocks):
                # One wrapper per model (the object graph keys nodes by identity), stored past
                # Keras' and TF's attribute tracking so the model's own layers do not change.
                wrapped = tf.__internal__.tracking.wrap(list(self.blocks))
                object.__setattr__(self, "_checkpoint_blocks", wrapped)
            children["blocks"] = wrapped
        return children

    def output_embedding(self):
        """The tied output head's matrix E (vocab, C) in float32. After model.quantize("int8") the
        embedding variable holds int8 codes with a per-row scale: read it dequantized (the raw
        codes would put logits off by ~1e3).

        Read outside Keras' autocast scope: GPT.__call__ opens one in the compute dtype under a
        mixed policy, and a float variable read inside it comes back bf16/fp16-rounded (the head
        and its gradient would then be rounded, contrary to "logits stay float32")."""
        layer = self.token_embedding
        with AutocastScope(None):
            if getattr(layer, "quantization_mode", None) == "int8":
                return (tf.cast(layer._embeddings, tf.float32)
                        / tf.cast(layer.embeddings_scale, tf.float32)[:, None])
            return tf.cast(layer.embeddings, tf.float32)


def decay_variables(model: GPT, decay_embeddings: bool = True) -> list:
    """The variables AdamW decays, chosen by role (not by name): Dense kernels, and the embedding
    tables when decay_embeddings; never biases or LayerNorm scales/offsets."""
    chosen = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Dense):
            chosen.append(layer.kernel)
        elif isinstance(layer, keras.layers.Embedding) and decay_embeddings:
            chosen.append(layer.embeddings)
    return chosen


def build_model(model_config, context_length: int, precision: str = "float32",
                remat: str = "none", vocab_size: int = VOCAB_SIZE) -> GPT:
    """A built (weights created) GPT for a config; `precision` is a Keras dtype policy name."""
    model = GPT(context_length=context_length, n_layer=model_config.n_layer,
                n_head=model_config.n_head, d_model=model_config.d_model,
                mlp_ratio=model_config.mlp_ratio, dropout=model_config.dropout,
                tie_embeddings=model_config.tie_embeddings, dtype=precision, remat=remat,
                vocab_size=vocab_size,
                name=model_config.name)
    model(tf.zeros([1, context_length], tf.int32))
    return model


def parameter_count(model: keras.Model) -> int:
    return int(sum(math.prod(v.shape) for v in model.trainable_variables))


def matmul_weights(model: GPT) -> tuple[int, int]:
    """(trainable, frozen) weights that take part in a matmul per token: every Dense kernel and
    the output head (V x C, the tied embedding read as a matrix). Embedding lookups, position
    embeddings, biases and LayerNorms are not matmuls."""
    head = model.token_embedding.embeddings if model.head is None else model.head.kernel
    counts = {True: 0, False: 0}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Dense) and layer is not model.head:
            counts[layer.kernel.trainable] += math.prod(layer.kernel.shape)
    counts[head.trainable] += math.prod(head.shape)
    return counts[True], counts[False]


def flops_per_token(model: GPT, context_length: int) -> int:
    """Training FLOPs per token, matmuls only: 6 M + 4 M_frozen + 12 x n_layer x T x C.
    A trainable matmul weight costs 2 FLOPs forward and 4 backward (activation and weight
    gradients); a frozen one 2 forward + 2 for the activation gradient (an upper bound: none is
    needed below the lowest trainable layer). 12 n_layer T C: attention scores and weighted sums
    (PaLM, Chowdhery et al. 2022, appendix B; the full T x T scores, as MFU figures count them)."""
    trainable, frozen = matmul_weights(model)
    d_model = model.token_embedding.output_dim
    return int(6 * trainable + 4 * frozen + 12 * len(model.blocks) * context_length * d_model)
