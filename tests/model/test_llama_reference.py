"""The llama block against an independent float64 NumPy forward pass written from the published
definitions, not from the model's code: RMSNorm (Zhang & Sennrich 2019), rotary embedding in the
HF/Llama convention (dimension i pairs with i + D/2, angle p x theta^(-2i/D)), grouped-query
attention (query head h reads key/value head h // (H / KV), as HF's repeat_kv), SwiGLU
(silu(x W_gate) * (x W_up)) W_down, no biases, tied head. The weights are read by their
variable paths; the documented layouts (qkv columns [q heads | k heads | v heads], fc columns
[gate | up]) are the only thing taken from the model.

Tolerance, per logit, derived from the arithmetic rather than from a run that passed: the
reference carries a first-order bound on |float32 - exact| (tests/support/rounding.py: for every
matmul gamma_K |x|.|y|, gamma_K = K u / (1 - K u), u = 2^-24, any summation order; a few u per
elementwise op; each weighted by |d logit / d op| of the reference, so depth, width and magnitude
all count). It is a worst case, ~4e-4 to 8e-3 on logits up to ~9, ~300x the differences measured
(a fixed atol of 2e-5 failed on a VM whose kernels summed in another order: 2.03e-5). Rotary
pairing (i, i+1) instead of (i, i + D/2), a sign flip in the rotation, a wrong rotary frequency, kv
head h % KV instead of h // G, SwiGLU's halves swapped or a missing 1/sqrt(D) put logits 5x to
8,000x past their bound; so does an RMSNorm epsilon 3x too large. (Shifting every rotary position
by one is invisible here: attention sees only relative angles. test_decoding covers positions.)
"""

import numpy as np
import pytest
import tensorflow as tf

from components.model import gpt
from components.training.warm_start import variable_paths
from tests.support.llama_reference import C, EPS, H, KV, L, T, THETA, V, bounded_reference


def _model(qk_norm: bool, n_kv_head: int = KV):
    tf.keras.utils.set_random_seed(7)
    model = gpt.GPT(context_length=T, n_layer=L, n_head=H, d_model=C, vocab_size=V, arch="llama",
                    n_kv_head=n_kv_head, rope_theta=THETA, norm_eps=EPS, qk_norm=qk_norm)
    model(tf.zeros([1, T], tf.int32))
    rng = np.random.default_rng(0)
    for variable in model.weights:   # O(1) weights: every part moves the logits visibly
        scale = 1.0 if variable.path.endswith("scale") else 0.3
        offset = 1.0 if variable.path.endswith("scale") else 0.0
        variable.assign((offset + scale * rng.normal(size=variable.shape)).astype(np.float32))
    return model


def reference_logits(model, ids, n_kv=KV, qk_norm=False, window=None):
    """ids (B, N) -> logits (B, N, V), float64 (bounded_reference's values)."""
    return bounded_reference(model, ids, n_kv, qk_norm, window, bound=False)[0]


@pytest.mark.parametrize("qk_norm, n_kv", [(False, KV), (True, 1)])
def test_llama_logits_equal_the_numpy_reference(qk_norm, n_kv):
    model = _model(qk_norm, n_kv)
    ids = np.random.default_rng(1).integers(0, V, (2, T))
    logits = model(tf.constant(ids, tf.int32), training=False).numpy()
    expected, bound = bounded_reference(model, ids, n_kv, qk_norm)
    assert np.abs(expected).max() > 1.0                   # not a vacuous comparison
    excess = np.abs(logits - expected) / bound
    assert excess.max() <= 1.0, f"{np.sum(excess > 1)} logits past their bound, worst x{excess.max():.3g}"


def test_llama_has_no_biases_and_no_position_table():
    model = _model(qk_norm=False)
    paths = list(variable_paths(model))
    assert not [p for p in paths if "bias" in p or "position" in p]
    assert model.blocks[0].attn.qkv.kernel.shape == (C, (H + 2 * KV) * C // H)
