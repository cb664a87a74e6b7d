"""Model widths derived from the config, importable without TensorFlow (the memory estimate and
the CLI's early checks use them before anything heavy is loaded)."""

from __future__ import annotations

import math

MLP_MULTIPLE = 32


def swiglu_hidden(d_model: int, mlp_ratio: int, mlp_hidden: int = 0) -> int:
    """F, the llama block's SwiGLU width: mlp_hidden when > 0, else 2/3 x mlp_ratio x d_model
    (the GELU MLP's parameter count with three matrices instead of two: 8/3 d_model at ratio 4)
    rounded up to a multiple of 32."""
    if mlp_hidden > 0:
        return mlp_hidden
    return MLP_MULTIPLE * math.ceil(2 * mlp_ratio * d_model / (3 * MLP_MULTIPLE))


def kv_width(model_config) -> int:
    """K: the width of the keys (and of the values), n_kv_head x head dim (0 heads = n_head)."""
    m = model_config
    return (m.n_kv_head or m.n_head) * (m.d_model // m.n_head)
