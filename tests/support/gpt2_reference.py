"""An independent float64 NumPy GPT-2 forward pass with a rounding-error bound per logit."""

import numpy as np

from components.training.warm_start import variable_paths
from tests.support import rounding


def bounded_reference(model, ids, keep=lambda row: slice(None)):
    """The gpt2 block, independent of the model's code: float64 NumPy from the published GPT-2
    definition (learned positions, pre-LayerNorm, multi-head causal attention with qkv columns
    [q | k | v] and heads contiguous within each, exact-erf GELU MLP, biases, tied head), and a
    first-order bound on how far any float32 evaluation may be from each logit
    (tests/support/rounding.py). ids (B, N) -> per row b, (logits[b][keep(b)], bound) (N, V) sliced."""
    w = {path[len("model/"):]: v.numpy().astype(np.float64)
         for path, v in variable_paths(model).items()}
    table, heads, eps = w["token_embedding/_embeddings"], model.blocks[0].attn.n_head, 1e-5
    out = []
    for b, row in enumerate(ids):
        steps = len(row)
        x = rounding.Bounded(table[row]) + w["position_embedding/_embeddings"][:steps]
        causal = np.tril(np.ones((steps, steps), bool))
        for i in range(len(model.blocks)):
            p = f"blocks/{i}/"
            h = rounding.layer_norm(x, w[p + "ln1/gamma"], w[p + "ln1/beta"], eps)
            qkv = (h @ w[p + "attn/qkv/_kernel"]) + w[p + "attn/qkv/bias"]
            width = qkv.shape[-1] // 3
            size = width // heads
            merged = []
            for j in range(heads):
                q, k, v = (qkv[:, part * width + j * size:part * width + (j + 1) * size] for part in range(3))
                merged.append(rounding.softmax(q.scaled(1 / np.sqrt(size)) @ k.T, causal) @ v)
            x = x + ((rounding.concatenate(merged) @ w[p + "attn/proj/_kernel"]) + w[p + "attn/proj/bias"])
            h = rounding.layer_norm(x, w[p + "ln2/gamma"], w[p + "ln2/beta"], eps)
            h = rounding.gelu((h @ w[p + "fc/_kernel"]) + w[p + "fc/bias"])
            x = x + ((h @ w[p + "fc_out/_kernel"]) + w[p + "fc_out/bias"])
        head = w.get("head/_kernel", table.T)                          # tied unless the model has one
        logits = (rounding.layer_norm(x, w["ln_f/gamma"], w["ln_f/beta"], eps) @ head)[keep(b)]
        out.append((logits.value, rounding.first_order_bound(logits)))
    return out
