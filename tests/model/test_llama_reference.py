"""The llama block against an independent float64 NumPy forward pass written from the published
definitions, not from the model's code: RMSNorm (Zhang & Sennrich 2019), rotary embedding in the
HF/Llama convention (dimension i pairs with i + D/2, angle p x theta^(-2i/D)), grouped-query
attention (query head h reads key/value head h // (H / KV), as HF's repeat_kv), SwiGLU
(silu(x W_gate) * (x W_up)) W_down, no biases, tied head. The weights are read by their
variable paths; the documented layouts (qkv columns [q heads | k heads | v heads], fc columns
[gate | up]) are the only thing taken from the model.

Tolerance: float32 model vs float64 reference, max |logit difference| <= 2e-5 (logits ~1).
Rotary pairing (i, i+1) instead of (i, i + D/2), a sign flip in the rotation, kv head h % KV
instead of h // G, or SwiGLU's halves swapped each put the logits off by > 1e-2.
"""

import numpy as np
import pytest
import tensorflow as tf

from components.model import gpt
from components.training.warm_start import variable_paths

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


def rms_norm(x, weight):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * weight


def rotate(x, positions):
    """x (T, D): pair (x_i, x_{i + D/2}) turned by positions x THETA^(-2i/D)."""
    half = x.shape[-1] // 2
    frequency = THETA ** (-2.0 * np.arange(half) / x.shape[-1])
    angle = positions[:, None] * frequency[None]
    a, b = x[:, :half], x[:, half:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle),
                           b * np.cos(angle) + a * np.sin(angle)], axis=-1)


def attention(x, w, prefix, n_kv, qk_norm, window):
    """x (N, C) -> (N, C), one sequence, head by head; query i sees keys i - window < j <= i."""
    D, steps = C // H, x.shape[0]
    qkv = x @ w[prefix + "attn/qkv/_kernel"]
    positions = np.arange(steps, dtype=np.float64)
    offset = np.arange(steps)[:, None] - np.arange(steps)[None]
    causal = (offset >= 0) & (offset < window)
    heads = []
    for h in range(H):
        kv = h // (H // n_kv)
        q = qkv[:, h * D:(h + 1) * D]
        k = qkv[:, (H + kv) * D:(H + kv + 1) * D]
        v = qkv[:, (H + n_kv + kv) * D:(H + n_kv + kv + 1) * D]
        if qk_norm:
            q, k = rms_norm(q, w[prefix + "attn/q_norm/scale"]), rms_norm(k, w[prefix + "attn/k_norm/scale"])
        q, k = rotate(q, positions), rotate(k, positions)
        scores = np.where(causal, q @ k.T / np.sqrt(D), -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        heads.append((p / p.sum(-1, keepdims=True)) @ v)
    return np.concatenate(heads, axis=-1) @ w[prefix + "attn/proj/_kernel"]


def reference_logits(model, ids, n_kv=KV, qk_norm=False, window=None):
    """ids (B, N) -> logits (B, N, V). window: every layer's query sees its last `window`
    keys (sliding-window attention, positions 0..N-1); None = all (plain causal)."""
    window = window or ids.shape[1]
    w = {path[len("model/"):]: v.numpy().astype(np.float64)
         for path, v in variable_paths(model).items()}
    table = w["token_embedding/_embeddings"]
    out = []
    for row in ids:
        x = table[row]
        for i in range(len(model.blocks)):
            p = f"blocks/{i}/"
            x = x + attention(rms_norm(x, w[p + "ln1/scale"]), w, p, n_kv, qk_norm, window)
            h = rms_norm(x, w[p + "ln2/scale"]) @ w[p + "fc/_kernel"]
            gate, up = h[:, :h.shape[1] // 2], h[:, h.shape[1] // 2:]
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "fc_out/_kernel"]
        out.append(rms_norm(x, w["ln_f/scale"]) @ table.T)
    return np.stack(out)


@pytest.mark.parametrize("qk_norm, n_kv", [(False, KV), (True, 1)])
def test_llama_logits_equal_the_numpy_reference(qk_norm, n_kv):
    model = _model(qk_norm, n_kv)
    ids = np.random.default_rng(1).integers(0, V, (2, T))
    logits = model(tf.constant(ids, tf.int32), training=False).numpy()
    expected = reference_logits(model, ids, n_kv, qk_norm)
    assert np.abs(expected).max() > 1.0                   # not a vacuous comparison
    np.testing.assert_allclose(logits, expected, rtol=0, atol=2e-5)


def test_llama_has_no_biases_and_no_position_table():
    model = _model(qk_norm=False)
    paths = list(variable_paths(model))
    assert not [p for p in paths if "bias" in p or "position" in p]
    assert model.blocks[0].attn.qkv.kernel.shape == (C, (H + 2 * KV) * C // H)
