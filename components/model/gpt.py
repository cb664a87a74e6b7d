"""A decoder-only Transformer (GPT) in Keras 3, built from ModelConfig.

Shapes: B = batch, T = sequence length (<= context), C = d_model, H = heads, D = C / H.
Pre-norm blocks: x = x + Attn(Norm(x)); x = x + MLP(Norm(x)); GPT-2's here (model.arch=gpt2),
the modern one in llama.py (model.arch=llama). Under a mixed precision policy the matmuls run in
float16/bfloat16 while the variables, the residual stream x, the norms, the softmax of the
attention and the logits stay float32 (logits feed the loss; low-precision logits lose the tail;
a bf16 residual stream rounds small updates away at depth).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
# Keras 3 exports no public way to leave a layer's autocast scope; the one it opens itself.
from keras.src.backend import AutocastScope

from components.config.tree import ARCHS, REMAT_MODES
from components.model.layers import (RMSNorm, attend, attend_with_dropout,  # noqa: F401 (gpt.attend)
                                     causal_mask, normal as _normal, stateless_dropout)
from components.model.llama import LlamaBlock
from components.model.shapes import swiglu_hidden


class CausalSelfAttention(keras.layers.Layer):
    def __init__(self, d_model: int, n_head: int, dropout: float, proj_std: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.n_head, self.head_dim, self.rate = n_head, d_model // n_head, dropout
        self.qkv = keras.layers.Dense(3 * d_model, kernel_initializer=_normal(0.02), name="qkv",
                                      dtype=self.dtype_policy)
        self.proj = keras.layers.Dense(d_model, kernel_initializer=_normal(proj_std), name="proj",
                                       dtype=self.dtype_policy)

    def build(self, input_shape):                                       # (B, T, C)
        self.qkv.build(input_shape)
        self.proj.build(input_shape)

    def split_heads(self, x, positions=None):
        """(B, T, C) compute dtype -> q, k, v each (B, H, T, D). (Positions are the model's
        embedding here; the argument matches llama.GroupedQueryAttention's for decoding.)"""
        batch, steps = tf.shape(x)[0], tf.shape(x)[1]
        qkv = tf.reshape(self.qkv(x), [batch, steps, 3, self.n_head, self.head_dim])
        return tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))

    def merge_heads(self, out):
        """(B, H, T, D) -> output projection (B, T, C)."""
        batch, steps = tf.shape(out)[0], tf.shape(out)[2]
        return self.proj(tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, steps, -1]))

    def attend_and_merge(self, q, k, v, mask, *, seed=None):
        """q, k, v (B, H, T*, D), mask broadcastable to (B, H, Tq, Tk) -> (B, Tq, C)."""
        return self.merge_heads(attend(q, k, v, mask, dropout_rate=self.rate, seed=seed))

    def call(self, x, training=False, seed=None):
        q, k, v = self.split_heads(x)
        steps = tf.shape(x)[1]
        return attend_with_dropout(self, q, k, v, causal_mask(steps, steps), training, seed)


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

    def build(self, input_shape):                                       # (B, T, C)
        for layer in (self.ln1, self.attn, self.ln2, self.fc):
            layer.build(input_shape)
        self.fc_out.build((*input_shape[:-1], self.fc.units))

    def feed_forward(self, h):
        """GELU MLP: (B, T, C) compute dtype -> (B, T, C) compute dtype."""
        return self.fc_out(self.fc(h))

    def call(self, x, training=False, seed=None):                      # x (B, T, C) float32
        compute = self.dtype_policy.compute_dtype
        attn_seed = None if seed is None else tf.random.experimental.stateless_fold_in(seed, 0)
        x = x + tf.cast(self.attn(tf.cast(self.ln1(x), compute), training=training,
                                  seed=attn_seed), tf.float32)
        h = self.feed_forward(tf.cast(self.ln2(x), compute))             # (B, T, C) compute
        if training and seed is not None and self.rate:
            h = stateless_dropout(h, self.rate, tf.random.experimental.stateless_fold_in(seed, 1))
        return x + tf.cast(h, tf.float32)


class GPT(keras.Model):
    """ids (B, T) int -> next-token logits (B, T, vocab) float32. T <= context_length.

    Dropout is stateless: call(ids, training=True, seed=int[2]) draws every mask from `seed`
    (the train step derives it from the step counter, replica and micro-batch). Without a seed
    (e.g. Keras fit) a random one is drawn per call. remat="blocks" recomputes each block in the
    backward pass (tf.recompute_grad; same seed, so the same dropout masks).

    arch="gpt2": learned positions, LayerNorm, GELU MLP, full multi-head attention, biases.
    arch="llama" (llama.py): no position table (rotary inside attention), RMSNorm, SwiGLU,
    grouped-query attention over n_kv_head key/value heads (0 = n_head), no biases, optional
    QK-norm. Both share the embedding, the tied/untied head and everything around the blocks."""

    def __init__(self, *, context_length: int, n_layer: int, n_head: int, d_model: int,
                 vocab_size: int, mlp_ratio: int = 4, dropout: float = 0.0,
                 tie_embeddings: bool = True, dtype: str = "float32",
                 remat: str = "none", arch: str = "gpt2", n_kv_head: int = 0,
                 rope_theta: float = 10000.0, norm_eps: float = 1e-5, qk_norm: bool = False,
                 mlp_hidden: int = 0, **kwargs):
        super().__init__(dtype=dtype, **kwargs)
        if remat not in REMAT_MODES or arch not in ARCHS:
            raise ValueError(f"remat {remat!r} / arch {arch!r}: not in {REMAT_MODES} / {ARCHS}")
        self.context_length, self.vocab_size, self.arch = context_length, vocab_size, arch
        self.tie_embeddings, self.rate, self.remat = tie_embeddings, dropout, remat
        # GPT-2 initialization (both archs): N(0, 0.02) everywhere, N(0, 0.02 / sqrt(2 n_layer))
        # for the two projections that add into the residual stream (2 per block), so its
        # variance at the top does not grow with depth. Biases start at zero, norms at (1, 0).
        residual_std = 0.02 / math.sqrt(2 * n_layer)
        self.token_embedding = keras.layers.Embedding(vocab_size, d_model, embeddings_initializer=_normal(0.02),
                                                      name="token_embedding", dtype="float32")
        if arch == "gpt2":
            self.position_embedding = keras.layers.Embedding(context_length, d_model,
                                                             embeddings_initializer=_normal(0.02),
                                                             name="position_embedding", dtype="float32")
            self.blocks = [Block(d_model, n_head, mlp_ratio, dropout, residual_std, name=f"block_{i}",
                                 dtype=dtype) for i in range(n_layer)]
            self.ln_f = keras.layers.LayerNormalization(epsilon=1e-5, name="ln_f", dtype="float32")
        else:
            self.position_embedding = None
            hidden = swiglu_hidden(d_model, mlp_ratio, mlp_hidden)
            self.blocks = [LlamaBlock(d_model, n_head, n_kv_head or n_head, hidden, dropout,
                                      rope_theta=rope_theta, qk_norm=qk_norm, norm_eps=norm_eps,
                                      residual_std=residual_std, name=f"block_{i}", dtype=dtype)
                           for i in range(n_layer)]
            self.ln_f = RMSNorm(norm_eps, name="ln_f", dtype="float32")
        self.head = None if tie_embeddings else keras.layers.Dense(
            vocab_size, use_bias=False, kernel_initializer=_normal(0.02), name="head", dtype="float32")

    def build(self, ids_shape):                                          # (B, T)
        """Every variable from the shapes alone. Without it Keras builds a layer by tracing its
        call() symbolically, and each nested layer again on its first call inside that trace: the
        tiny preset's build_model took 2.0-2.4 CPU-s, about 0.2 s with these builds (a model is
        built for every training run, serving copy and export)."""
        stream = (*ids_shape, self.token_embedding.output_dim)            # (B, T, C)
        self.token_embedding.build(ids_shape)
        if self.position_embedding is not None:
            self.position_embedding.build(ids_shape)
        for layer in (*self.blocks, self.ln_f, self.head):
            if layer is not None:                                          # head: None if tied
                layer.build(stream)

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
        x = self.token_embedding(ids)
        if self.position_embedding is not None:
            x = x + self.position_embedding(tf.range(tf.shape(ids)[1]))[tf.newaxis]
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
        """Final norm and output head: (B, T, C) -> logits (B, T, vocab) float32."""
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
    tables when decay_embeddings; never biases or norm scales/offsets (LayerNorm, RMSNorm)."""
    chosen = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Dense):
            chosen.append(layer.kernel)
        elif isinstance(layer, keras.layers.Embedding) and decay_embeddings:
            chosen.append(layer.embeddings)
    return chosen


def build_model(model_config, context_length: int, precision: str = "float32",
                remat: str = "none", *, vocab_size: int) -> GPT:
    """A built (weights created) GPT for a config; `precision` is a Keras dtype policy name.
    `vocab_size` is the tokenizer's (token_spec(config.data).vocab_size); it has no default, so a
    caller cannot get the byte tokenizer's size by leaving it out."""
    model = GPT(context_length=context_length, dtype=precision, remat=remat, vocab_size=vocab_size,
                **model_arguments(model_config))
    model(tf.zeros([1, context_length], tf.int32))
    return model


def model_arguments(model_config) -> dict:
    """GPT's keyword arguments from a ModelConfig (every model.* setting but the name's key)."""
    m = model_config
    return dict(n_layer=m.n_layer, n_head=m.n_head, d_model=m.d_model, mlp_ratio=m.mlp_ratio,
                dropout=m.dropout, tie_embeddings=m.tie_embeddings, arch=m.arch,
                n_kv_head=m.n_kv_head, rope_theta=m.rope_theta, norm_eps=m.norm_eps,
                qk_norm=m.qk_norm, mlp_hidden=m.mlp_hidden, name=m.name)


def parameter_count(model: keras.Model) -> int:
    return int(sum(math.prod(v.shape) for v in model.trainable_variables))


def matmul_weights(model: GPT) -> tuple[int, int]:
    """(trainable, frozen) weights that take part in a matmul per token: every Dense kernel and
    the output head (V x C, the tied embedding read as a matrix). Embedding lookups, position
    embeddings, biases and norms are not matmuls. Read from the kernels' shapes, so GQA's
    narrower k/v columns and SwiGLU's three matrices (fc is [gate | up]) count as they are."""
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
    (PaLM, Chowdhery et al. 2022, appendix B; the full T x T scores, as MFU figures count them).
    The attention term is the same under GQA: every query head still scores T keys of width D."""
    trainable, frozen = matmul_weights(model)
    d_model = model.token_embedding.output_dim
    return int(6 * trainable + 4 * frozen + 12 * len(model.blocks) * context_length * d_model)
