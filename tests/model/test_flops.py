"""FLOPs per token count matmuls only, frozen weights included; the peak loop keeps its operands
non-zero (issue 20, item 9)."""

import numpy as np
import pytest
import tensorflow as tf

from components.model import gpt
from components.training import warm_start

L, C, T, V, RATIO = 2, 32, 16, 259, 4
BLOCK_MATMUL = (4 + 2 * RATIO) * C * C          # qkv 3C^2, proj C^2, fc and fc_out 4C^2 each
ATTENTION = 12 * L * T * C


def _model(tied=True):
    model = gpt.GPT(context_length=T, n_layer=L, n_head=2, d_model=C, mlp_ratio=RATIO,
                    vocab_size=V, tie_embeddings=tied)
    model(tf.zeros([1, T], tf.int32))
    return model


def test_flops_count_matmul_weights_and_frozen_ones():
    """Fails before the fix: 6 N used N = every trainable parameter (position-embedding lookups,
    biases and LayerNorms counted as matmuls) and left frozen blocks out entirely.
    Reference: the matmul shapes written out by hand."""
    head = V * C
    assert gpt.flops_per_token(_model(), T) == 6 * (L * BLOCK_MATMUL + head) + ATTENTION
    untied = _model(tied=False)                  # the head is its own matrix; lookups are free
    assert gpt.flops_per_token(untied, T) == 6 * (L * BLOCK_MATMUL + head) + ATTENTION
    frozen = _model()
    warm_start.freeze(frozen, ["blocks:1"])
    assert gpt.flops_per_token(frozen, T) == (6 * (BLOCK_MATMUL + head) + 4 * BLOCK_MATMUL
                                              + ATTENTION)


def test_llama_flops_count_gqa_and_the_three_swiglu_matrices():
    """Hand count: q C^2, k and v 2 C K (K = n_kv_head x D = C / 2 here), proj C^2, SwiGLU's gate,
    up and down 3 C F (F = 96: 2/3 x 4 x 32 = 85.3 rounded up to 32). No position table, no
    biases; the attention term is unchanged (every query head scores T keys)."""
    hidden, kv = 96, C // 2
    block = C * C + 2 * C * kv + C * C + 3 * C * hidden
    model = gpt.GPT(context_length=T, n_layer=L, n_head=2, d_model=C, mlp_ratio=RATIO,
                    vocab_size=V, arch="llama", n_kv_head=1)
    model(tf.zeros([1, T], tf.int32))
    assert gpt.matmul_weights(model) == (L * block + V * C, 0)
    assert gpt.flops_per_token(model, T) == 6 * (L * block + V * C) + ATTENTION


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul_peak_chain_keeps_operands_non_zero(dtype):
    """Fails before the fix (in spirit: the old loop was inline): x = x @ a / size shrank x by
    ~sqrt(size) per step, so after ~24 steps it multiplied zero matrices; and without the
    periodic rescaling, bfloat16 rounding shrank the norm x0.43 in 300 products on an AMD EPYC
    (3,000 products: 3e-4 of it)."""
    from benchmarks.train_throughput import matmul_chain
    size = 64
    chain, q = matmul_chain(dtype, size)
    out = tf.cast(chain(q, tf.constant(3000)), tf.float32).numpy()
    assert np.count_nonzero(out) == out.size and np.isfinite(out).all()
    assert np.linalg.norm(out) == pytest.approx(np.sqrt(size), rel=0.25)
