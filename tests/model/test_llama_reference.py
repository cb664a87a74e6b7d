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
from tests.support import rounding

V, T, C, H, KV, L, THETA, EPS = 61, 8, 32, 4, 2, 2, 10000.0, 1e-5


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


def attention(x, w, prefix, n_kv, qk_norm, window, heads=H, theta=THETA, eps=EPS):
    """x (N, C) -> (N, C), one sequence, head by head; query i sees keys i - window < j <= i."""
    D, steps = x.shape[-1] // heads, x.value.shape[0]
    qkv = x @ w[prefix + "attn/qkv/_kernel"]
    positions = np.arange(steps, dtype=np.float64)
    offset = np.arange(steps)[:, None] - np.arange(steps)[None]
    causal = (offset >= 0) & (offset < window)
    merged = []
    for h in range(heads):
        kv = h // (heads // n_kv)
        q = qkv[:, h * D:(h + 1) * D]
        k = qkv[:, (heads + kv) * D:(heads + kv + 1) * D]
        v = qkv[:, (heads + n_kv + kv) * D:(heads + n_kv + kv + 1) * D]
        if qk_norm:
            q = rounding.rms_norm(q, w[prefix + "attn/q_norm/scale"], eps)
            k = rounding.rms_norm(k, w[prefix + "attn/k_norm/scale"], eps)
        q, k = rounding.rotate_half(q, positions, theta), rounding.rotate_half(k, positions, theta)
        p = rounding.softmax(q.scaled(1 / np.sqrt(D)) @ k.T, causal)
        merged.append(p @ v)
    return rounding.concatenate(merged) @ w[prefix + "attn/proj/_kernel"]


def bounded_reference(model, ids, n_kv=KV, qk_norm=False, window=None, bound=True, *,
                      heads=H, theta=THETA, eps=EPS):
    """ids (B, N) -> (logits (B, N, V) float64, bound (B, N, V) or None): per logit, how far any
    float32 evaluation of the same model may be from the value (tests/support/rounding.py: gamma_K
    |x|.|y| per matmul, a few u per elementwise op, each weighted by |d logit / d op|).
    window: every layer's query sees its last `window` keys (sliding-window attention, positions
    0..N-1); None = all (plain causal). heads, theta, eps: other models' settings (defaults:
    this module's); an untied head (a `head` kernel) is used where the model has one."""
    window = window or ids.shape[1]
    w = {path[len("model/"):]: v.numpy().astype(np.float64)
         for path, v in variable_paths(model).items()}
    table = w["token_embedding/_embeddings"]
    out = []
    for row in ids:
        x = rounding.Bounded(table[row])
        for i in range(len(model.blocks)):
            p = f"blocks/{i}/"
            x = x + attention(rounding.rms_norm(x, w[p + "ln1/scale"], eps), w, p, n_kv, qk_norm,
                              window, heads, theta, eps)
            h = rounding.rms_norm(x, w[p + "ln2/scale"], eps) @ w[p + "fc/_kernel"]
            half = h.value.shape[1] // 2
            x = x + (rounding.silu(h[:, :half]) * h[:, half:]) @ w[p + "fc_out/_kernel"]
        out.append(rounding.rms_norm(x, w["ln_f/scale"], eps) @ w.get("head/_kernel", table.T))
    values = np.stack([o.value for o in out])
    return values, (np.stack([rounding.first_order_bound(o) for o in out]) if bound else None)


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
