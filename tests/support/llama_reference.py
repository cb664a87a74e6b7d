"""An independent float64 NumPy llama forward pass (grouped-query attention, rotary, optional
sliding window) with a rounding-error bound per logit."""

import numpy as np

from components.training.warm_start import variable_paths
from tests.support import rounding


V, T, C, H, KV, L, THETA, EPS = 61, 8, 32, 4, 2, 2, 10000.0, 1e-5


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
