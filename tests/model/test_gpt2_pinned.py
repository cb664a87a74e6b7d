"""`model.arch=gpt2` is the block bigtrain trained before the llama block existed, kept bit for bit
so that old configs, checkpoints and warm starts behave as they did. The figures below were taken
from the tree before the llama block was added (e421e07, the parent of the merge that brought it)
with the same seed and settings: every variable's path, shape and bytes, and the logits of a fixed
batch. A renamed variable, a reordered creation (another draw from the seed), an initializer or a
layer changed for both blocks fails here; so does a gpt2 block that departs from the published
definition (the float64 reference below, written without the model's code)."""

import hashlib

import keras
import numpy as np
import tensorflow as tf

from components.config import ModelConfig
from components.model.gpt import build_model
from tests.support.gpt2_reference import bounded_reference

# sha256 over (path, shape, float32 bytes) of every variable, in model.weights order, at seed 1234.
WEIGHTS_SHA256 = "fe4545a86242a4323dc3907c8ed0d956e88ed0c219b0db386d954fcf2dd7ee7e"
FIRST_PATHS = ["gpt/token_embedding/embeddings", "gpt/position_embedding/embeddings",
               "gpt/block_0/ln1/gamma", "gpt/block_0/ln1/beta"]
LAST_PATHS = ["gpt/block_1/fc_out/kernel", "gpt/block_1/fc_out/bias", "gpt/ln_f/gamma",
              "gpt/ln_f/beta"]
VARIABLES = 28
# logits[0, :2, :3] and logits[1, -1, :3] of the old tree, printed to 8 decimals (+-5e-9). Another
# CPU's float32 kernels round differently, so the tolerance is derived, not fixed: the old tree's
# figures and ours are each within B of the exact logits, B the first-order float32 bound of
# bounded_reference below (tests/support/rounding.py: gamma_K |x|.|y| per matmul, carried to the
# logits), so they differ by at most 2 B + 5e-9 (B ~2e-4 here; the two trees differ by ~1e-7).
LOGITS = {
    (0, 0): [0.41612163, -0.21136612, 0.17247625],
    (0, 1): [-0.13858090, 0.61981040, 0.16210327],
    (1, 31): [0.07533596, -0.03837531, -0.13327126],
}


def pinned_model():
    config = ModelConfig(arch="gpt2", n_layer=2, n_head=4, n_kv_head=0, d_model=64, mlp_ratio=4,
                         dropout=0.0, tie_embeddings=True)
    keras.utils.set_random_seed(1234)
    return build_model(config, 32, "float32", vocab_size=259)


def weights_digest(model) -> str:
    digest = hashlib.sha256()
    for variable in model.weights:
        value = np.asarray(variable.numpy())
        digest.update(variable.path.encode())
        digest.update(str(value.shape).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def test_gpt2_weights_and_logits_equal_the_tree_before_the_llama_block():
    model = pinned_model()
    paths = [v.path for v in model.weights]
    assert len(paths) == VARIABLES
    assert paths[:4] == FIRST_PATHS and paths[-4:] == LAST_PATHS
    assert weights_digest(model) == WEIGHTS_SHA256
    ids = np.arange(64).reshape(2, 32) % 259
    logits = model(tf.constant(ids, tf.int32)).numpy()
    pinned = {0: (slice(0, 2), slice(0, 3)), 1: (slice(31, 32), slice(0, 3))}
    for row, (reference, bound) in enumerate(bounded_reference(model, ids, keep=pinned.get)):
        ours = logits[row][pinned[row]]
        old = np.array([expected for (r, _), expected in LOGITS.items() if r == row])
        assert np.all(np.abs(ours - reference) <= bound), (ours, reference, bound)
        assert np.all(np.abs(ours - old) <= 2 * bound + 5e-9), (ours, old, bound)


