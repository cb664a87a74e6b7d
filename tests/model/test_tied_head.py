"""The tied output head is float32 under mixed precision (issue 20, item 3).

Reference: ln_f's scale set to 0 and its offset to a known vector v makes every final hidden
state equal v, independent of the input. The tied head's logits are then E v and, for a weight
W on the logits, the gradient reaching the embedding table is exactly sum_(b,t) W[b,t,:] (x) v (the
lookup's gradient is zero: nothing downstream depends on the looked-up rows). Both are computed
in float64 NumPy from the float32 table. Tolerances from the arithmetic (tests/support/rounding.py):
ln_f returns v exactly (x * 0 + v), so each float32 logit is one length-C dot product,
|fl(E v) - E v| <= gamma_C |E| |v| (~3e-6 here), and each gradient entry one length-(B T) sum,
<= gamma_(BT) sum_(b,t) |W[b,t,i]| |v_c| (~1e-4 on entries ~5). bf16 rounding of E (relative
2^-9 ~ 2e-3) puts the logits off by ~1e-4 and the gradient by ~2e-3 relative: far above them.
"""

import numpy as np
import pytest
import tensorflow as tf

from components.model import decoding, gpt
from tests.support import rounding

VOCAB, CONTEXT, D_MODEL = 97, 16, 64


def _model(precision: str, arch: str = "gpt2") -> gpt.GPT:
    tf.keras.utils.set_random_seed(3)
    model = gpt.GPT(context_length=CONTEXT, n_layer=2, n_head=4, d_model=D_MODEL,
                    vocab_size=VOCAB, dtype=precision, arch=arch,
                    n_kv_head=2 if arch == "llama" else 0)
    model(tf.zeros([1, CONTEXT], tf.int32))
    return model


def _ids(batch=3):
    return tf.constant(np.random.default_rng(0).integers(0, VOCAB, (batch, CONTEXT)), tf.int32)


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_tied_head_logits_and_gradient_are_float32(precision):
    """Fails before the fix (the embedding was read inside GPT.__call__'s autocast scope, so the
    head used a bf16/fp16-rounded E: logits off by ~1e-4, gradient ~1e-3 relative)."""
    model = _model(precision)
    v = np.random.default_rng(1).normal(size=D_MODEL).astype(np.float32)
    model.ln_f.gamma.assign(np.zeros(D_MODEL, np.float32))
    model.ln_f.beta.assign(v)
    table = model.token_embedding.embeddings.numpy().astype(np.float64)   # (V, C) float32 values
    weight = np.random.default_rng(2).normal(size=(3, CONTEXT, VOCAB)).astype(np.float32)
    with tf.GradientTape() as tape:
        logits = model(_ids(), training=False)
        objective = tf.reduce_sum(logits * weight)
    grad = tape.gradient(objective, model.token_embedding.embeddings)
    grad = tf.convert_to_tensor(grad).numpy().astype(np.float64)
    assert logits.dtype == tf.float32
    expected_logits = table @ v.astype(np.float64)                       # (V,)
    logit_bound = rounding.gamma(D_MODEL) * (np.abs(table) @ np.abs(v.astype(np.float64)))
    assert np.all(np.abs(logits.numpy() - expected_logits) <= logit_bound)
    expected_grad = np.outer(weight.astype(np.float64).sum(axis=(0, 1)), v)
    grad_bound = rounding.gamma(weight.shape[0] * CONTEXT) * np.outer(
        np.abs(weight.astype(np.float64)).sum(axis=(0, 1)), np.abs(v))
    assert np.all(np.abs(grad - expected_grad) <= grad_bound)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_prefill_equals_model_call_under_bf16(arch):
    """Fails before the fix: the cached decoder (outside any autocast scope) read E in float32
    while model.call read it bf16-rounded, so prefill logits differed by ~5e-4. llama: the same
    casts around rotary (float32) and grouped-query attention on both paths."""
    model = _model("mixed_bfloat16", arch)
    window = _ids(2)
    lengths = tf.constant([CONTEXT, 5], tf.int32)
    next_logits, _ = decoding.prefill(model, window, lengths)
    full = model(window, training=False)
    expected = tf.gather(full, lengths - 1, batch_dims=1)
    np.testing.assert_allclose(next_logits.numpy(), expected.numpy(), rtol=0, atol=1e-5)
