"""Cached decoding (components/model/decoding.py) against full recomputation.

Within the window (both archs): prefill + steps equal model(ids[:p + 1]) at p. Past the window
(llama): the cache slides one slot per token and keys keep the rotary angle of their absolute
position; the logits equal the whole sequence recomputed with sliding-window attention in every
layer (query p sees keys p - T < j <= p), by the independent NumPy model of
test_llama_reference.py and by decoding.sliding_window_logits. (Not the last T tokens recomputed
alone: a kept layer-2 key was computed while its token saw the dropped ones; measured 1.7 apart.)
Tolerances derived from the arithmetic, per logit: the float64 references (the NumPy models of
test_llama_reference.py and test_gpt2_pinned.py) carry a first-order float32 bound B (tests/support/
rounding.py: gamma_K |x|.|y| per matmul, a few u per elementwise op, weighted by |d logit / d op|);
any float32 evaluation, cached or not, is within B of the exact logits, so cached vs recomputed
differ by at most 2 B and either differs from the reference by at most B (B is a worst case, far
above the differences measured, 6e-6 on logits of size ~5). With the new token rotated at its slot
instead of its position, or a slide that keeps the oldest key, the past-window check fails (x400,
x1,600 past B); a step that does not see its own slot fails the within-window check (x108).
"""

import numpy as np
import pytest
import tensorflow as tf

from components.model import decoding, gpt
from tests.support.gpt2_reference import bounded_reference as gpt2_reference
from tests.support.llama_reference import bounded_reference

V, T, C = 61, 8, 32


def _model(arch: str):
    tf.keras.utils.set_random_seed(5)
    model = gpt.GPT(context_length=T, n_layer=2, n_head=4, d_model=C, vocab_size=V, arch=arch,
                    n_kv_head=2 if arch == "llama" else 0)
    model(tf.zeros([1, T], tf.int32))
    rng = np.random.default_rng(0)      # larger than the init: logits differ by clear margins
    model.set_weights([w + rng.normal(0, 0.3, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


def _last(model, ids):
    """Full recomputation: next-token logits after ids (1, n <= T)."""
    return model(tf.constant(ids, tf.int32), training=False)[:, -1].numpy()


def _bounds(model, arch, ids):
    """Bound on |float32 - exact| of the next-token logits after ids[:, :p + 1], for every p:
    (1, n, V). Causal, so position p's logits are those of the prefix; the bound of the whole
    row sums its softmax over n >= p + 1 columns (gamma_n >= gamma_(p+1)): valid for each prefix."""
    if arch == "llama":
        return bounded_reference(model, ids, n_kv=2)[1]
    return np.stack([bound for _, bound in gpt2_reference(model, ids)])


def _assert_within(got, expected, bound):
    excess = np.abs(got - expected) / bound
    assert excess.max() <= 1.0, f"{np.sum(excess > 1)} logits past their bound, worst x{excess.max():.3g}"


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_steps_within_the_window_equal_full_recomputation(arch):
    model = _model(arch)
    ids = np.random.default_rng(1).integers(0, V, (1, T))
    window = np.where(np.arange(T) < 3, ids, 0)                       # right-padded, length 3
    logits, cache = decoding.prefill(model, tf.constant(window, tf.int32), tf.constant([3]))
    assert cache[0][0].shape == (1, 2 if arch == "llama" else 4, T, C // 4)    # (B, KV, T, D)
    bound = _bounds(model, arch, ids)
    _assert_within(logits.numpy(), _last(model, ids[:, :3]), 2 * bound[:, 2])
    for p in range(3, T):
        logits, cache = decoding.step(model, tf.constant(ids[:, p], tf.int32), tf.constant([p]), cache)
        _assert_within(logits.numpy(), _last(model, ids[:, :p + 1]), 2 * bound[:, p])


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_sliding_cache_equals_recomputing_the_last_window():
    """Two rows, the server loop of decoding's docstring: row 0 starts full, row 1 two tokens
    short, so the rows slide at different steps (slide only touches its rows)."""
    model = _model("llama")
    assert decoding.can_slide(model) and not decoding.can_slide(_model("gpt2"))
    ids = np.random.default_rng(2).integers(0, V, (2, 3 * T))
    expected, bound = bounded_reference(model, ids, n_kv=2, window=T)        # (2, 3T, V) each
    in_graph = decoding.sliding_window_logits(model, tf.constant(ids, tf.int32), T).numpy()
    _assert_within(in_graph, expected, bound)
    filled = np.array([T, T - 2], np.int32)
    window = np.where(np.arange(T)[None] < filled[:, None], ids[:, :T], 0)
    logits, cache = decoding.prefill(model, tf.constant(window, tf.int32), tf.constant(filled))
    position = filled.copy()
    for _ in range(2 * T):
        full = filled >= T
        cache = decoding.slide(cache, tf.constant(full))
        filled = np.where(full, T - 1, filled)
        token = ids[np.arange(2), position]
        logits, cache = decoding.step(model, tf.constant(token, tf.int32), tf.constant(position),
                                      cache, slot=tf.constant(filled))
        filled, position = filled + 1, position + 1
        _assert_within(logits.numpy(), expected[np.arange(2), position - 1],
                       bound[np.arange(2), position - 1])
    assert position.min() > 2 * T                          # both rows slid for T steps or more
