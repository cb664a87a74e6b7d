"""A float64 NumPy reference of the loss gradients and the fixtures its tests share: a batch of ids
from real shards, the reference, the relative error."""

import numpy as np
import pytest
import tensorflow as tf

from components.model.gpt import build_model
from components.tokenizer.byte_level import PAD_ID, VOCAB_SIZE
from components.training import input as input_lib
from tests.training.conftest import SEQ_LEN


@pytest.fixture(scope="module")
def ids(shards):
    """(16, T + 1) ids of real text; rows 8-15 padded after position 3, so about half of the
    targets are PAD and replica 1's share (rows 8-15) holds ~1/8 of the real targets."""
    dataset = input_lib.make_dataset(shards["train"], SEQ_LEN, 16, shuffle_buffer=0)
    inputs, targets = next(iter(dataset))
    full = np.concatenate([inputs.numpy(), targets.numpy()[:, -1:]], axis=1)
    full[8:, 4:] = PAD_ID
    return full


def reference(config, weights, ids):
    """Loss and gradient of the global mean token loss, one device, one tape, no strategy."""
    model = build_model(config.model, SEQ_LEN, "float32", vocab_size=VOCAB_SIZE)
    model.set_weights(weights)
    inputs, targets = tf.constant(ids[:, :-1]), tf.constant(ids[:, 1:])
    with tf.GradientTape() as tape:
        logp = tf.nn.log_softmax(model(inputs, training=False))              # (B, T, V)
        nll = -tf.gather(logp, targets, batch_dims=2)                         # (B, T)
        real = tf.not_equal(targets, PAD_ID)
        loss = tf.reduce_sum(tf.where(real, nll, 0.0)) / tf.reduce_sum(tf.cast(real, tf.float32))
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]


def relative_error(grads, ref):
    diff = np.sqrt(sum(float(np.sum((g.astype(np.float64) - r) ** 2)) for g, r in zip(grads, ref)))
    return diff / np.sqrt(sum(float(np.sum(r.astype(np.float64) ** 2)) for r in ref))
