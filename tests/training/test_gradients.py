"""Equivalence tests that can fail: the train step's loss and its gradient *before clipping*
against an independent reference, a plain tf.GradientTape over the whole global batch on one
device (no strategy, no train-step code, its own cross-entropy), for every split of the global
batch. Gradients are compared directly, not weights after AdamW + clipping (both nearly
invariant to the gradient's scale, so a SUM-vs-MEAN all-reduce or a missing loss-scale division
would pass such a test).

Tolerances (relative error of the whole gradient, ||g - g_ref|| / ||g_ref||; loss relative):
  float32, any replica x micro-batch split, XLA on/off:   1e-5 (measured 2.6e-7, loss 9e-8)
  mixed_float16 (loss scale 2^15) vs the float32 reference: 2e-3 (measured 2.5e-4, loss 3e-7)
  mixed_bfloat16 vs the float32 reference:                  5e-2 (measured 6.1e-3, loss 2e-6)
  remat=blocks vs none (dropout 0.1): max |difference| 1e-5 (measured 0.0: same ops, same masks)
Mutation checks (test_*_is_caught): with the all-reduce switched to MEAN, or with the division
by the loss scale dropped, the same comparisons fail; so these tests guard exactly those bugs.
The half-padded batch catches a loss normalized per replica or by positions instead of by the
global count of real targets (the replicas' shares then hold very different token counts).
"""

import json
import os

import keras
import numpy as np
import portpicker
import pytest
import tensorflow as tf

from components.metrics.lm import evaluate_logits_fn
from components.model.gpt import build_model
from components.text_example_gen import shards as shard_files
from components.tokenizer.byte_level import PAD_ID, VOCAB_SIZE, ByteTokenizer
from components.training import input as input_lib
from components.training import loop, optimizer as optimizer_lib, train_step
from components.training.strategy import make_strategy
from tests.training.conftest import GPT2, SEQ_LEN, tiny_config
from tests.support.gradients import ids, reference, relative_error

FLOAT32_TOLERANCE = 1e-5
MIXED_TOLERANCE = {"mixed_float16": 2e-3, "mixed_bfloat16": 5e-2}


def step_gradients(config, ids, *, xla=False, weights=None):
    """The train step's (loss, pre-clip gradients, per-replica losses, initial weights)."""
    strategy = make_strategy(config.runtime)
    keras.utils.set_random_seed(config.train.seed)
    model, state, _, _ = loop.build_training(config, strategy)
    if weights is not None:
        model.set_weights(weights)
    fn = train_step.make_gradient_fn(
        model, strategy, state, global_batch_size=config.train.global_batch_size,
        accumulation_steps=config.train.accumulation_steps,
        dynamic_loss_scale=config.runtime.precision == "mixed_float16", seed=config.train.seed,
        xla=xla, pad_id=PAD_ID)

    @tf.function
    def run(inputs, targets):
        loss, grads, replica_loss = strategy.run(fn, args=(inputs, targets))
        first = lambda r: strategy.experimental_local_results(r)[0]
        return first(loss), [first(g) for g in grads], strategy.experimental_local_results(replica_loss)

    loss, grads, replica_losses = run(tf.constant(ids[:, :-1]), tf.constant(ids[:, 1:]))
    return (float(loss), [g.numpy() for g in grads], [float(r) for r in replica_losses],
            model.get_weights())


def compare(config, ids, **kwargs):
    loss, grads, _, weights = step_gradients(config, ids, **kwargs)
    ref_loss, ref_grads = reference(config, weights, ids)
    assert len(grads) == len(ref_grads)
    return abs(loss - ref_loss) / ref_loss, relative_error(grads, ref_grads)


SPLITS = {
    "one_device": ["runtime.strategy=one_device"],
    "mirrored": ["runtime.strategy=mirrored", "runtime.cpu_replicas=2"],
    "accumulation": ["runtime.strategy=one_device", "train.accumulation_steps=4"],
    "mirrored+accumulation": ["runtime.strategy=mirrored", "runtime.cpu_replicas=2", "train.accumulation_steps=4"],
}


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("split", SPLITS)
def test_float32_split_matches_reference(ids, split):
    loss_error, grad_error = compare(tiny_config(*SPLITS[split]), ids)
    assert loss_error <= FLOAT32_TOLERANCE and grad_error <= FLOAT32_TOLERANCE


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_gpt2_block_split_matches_reference(ids):
    loss_error, grad_error = compare(tiny_config(*SPLITS["mirrored+accumulation"], *GPT2), ids)
    assert loss_error <= FLOAT32_TOLERANCE and grad_error <= FLOAT32_TOLERANCE


@pytest.mark.slow   # compiles the step with XLA (fast tier: docs/benchmarks.md)
def test_xla_matches_reference(ids):
    config = tiny_config("runtime.strategy=mirrored", "runtime.cpu_replicas=2", "train.accumulation_steps=2")
    loss_error, grad_error = compare(config, ids, xla=True)
    assert loss_error <= FLOAT32_TOLERANCE and grad_error <= FLOAT32_TOLERANCE


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
@pytest.mark.parametrize("precision", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_matches_float32_reference(ids, precision):
    config = tiny_config("runtime.strategy=mirrored", "runtime.cpu_replicas=2", "train.accumulation_steps=2",
                         f"runtime.precision={precision}")
    loss_error, grad_error = compare(config, ids)
    assert loss_error <= MIXED_TOLERANCE[precision] and grad_error <= MIXED_TOLERANCE[precision]


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_mean_all_reduce_is_caught(ids, monkeypatch):
    """Mutation: averaging instead of summing over 2 replicas halves loss and gradient."""
    monkeypatch.setattr(train_step, "GRADIENT_REDUCTION", tf.distribute.ReduceOp.MEAN)
    loss_error, grad_error = compare(tiny_config(*SPLITS["mirrored"]), ids)
    assert loss_error > 0.4 and grad_error > 0.4


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_dropped_loss_scale_division_is_caught(ids, monkeypatch):
    """Mutation: gradients left multiplied by the fp16 loss scale (2^15)."""
    monkeypatch.setattr(train_step, "unscale", lambda grads, scale: grads)
    config = tiny_config(*SPLITS["mirrored"], "runtime.precision=mixed_float16")
    _, grad_error = compare(config, ids)
    assert grad_error > 100


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_half_padded_batch_train_loss_equals_metrics_loss(ids, tmp_path):
    """Loss = sum of token losses / global count of real targets: the train step's loss on a
    half-padded batch split unevenly over 2 replicas x 2 micro-batches equals the evaluation
    metrics' loss on the same sequences (measured in eval micro-batches of 4)."""
    config = tiny_config(*SPLITS["mirrored"], "train.accumulation_steps=2")
    loss, _, replica_losses, weights = step_gradients(config, ids)
    path = str(tmp_path / "half_padded.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for row in ids:
            writer.write(shard_files.encode_examples(np.asarray(row)[None])[0])
    model = build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE)
    model.set_weights(weights)
    metrics = evaluate_logits_fn(lambda x: model(x, training=False), path, SEQ_LEN, 4, 0,
                               tokenizer=ByteTokenizer())
    assert metrics["tokens"] == int(np.sum(ids[:, 1:] != PAD_ID))
    assert loss == pytest.approx(metrics["loss"], rel=1e-6)
    # The split is uneven: replica 0 carries most of the real targets, hence most of the loss.
    assert replica_losses[0] > 4 * replica_losses[1]


class PreReducedSGD(optimizer_lib._PreReduced, keras.optimizers.SGD):
    """Plain SGD that, like the training optimizer, takes gradients train_step has all-reduced."""


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_sgd_without_clipping_moves_weights_by_lr_times_reference_gradient(ids):
    """Mirrored x accumulation, plain SGD, no clipping: w1 = w0 - lr g_ref exactly (1e-6)."""
    config = tiny_config(*SPLITS["mirrored+accumulation"])
    strategy = make_strategy(config.runtime)
    keras.utils.set_random_seed(config.train.seed)
    model, state, _, _ = loop.build_training(config, strategy)
    with strategy.scope():
        sgd = PreReducedSGD(learning_rate=0.5)
        sgd.build(model.trainable_variables)
    w0 = model.get_weights()
    step = train_step.make_train_step(model, sgd, strategy, state, global_batch_size=16,
                                      accumulation_steps=4, clip_norm=None,
                                      dynamic_loss_scale=False, pad_id=PAD_ID)
    data = tf.data.Dataset.from_tensors((ids[:, :-1], ids[:, 1:])).repeat()
    step(iter(data))
    _, ref_grads = reference(config, w0, ids)
    moved = max(float(np.max(np.abs(w - v))) for w, v in zip(model.get_weights(), w0))
    assert moved > 1e-3
    for w1, w, g in zip(model.get_weights(), w0, ref_grads):
        np.testing.assert_allclose(w1, w - 0.5 * g, atol=1e-6)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_remat_gradients_equal_no_remat_with_dropout(ids):
    """train.remat=blocks recomputes each block with the same stateless dropout seed."""
    overrides = (*SPLITS["accumulation"], "model.dropout=0.1")
    loss, grads, _, weights = step_gradients(tiny_config(*overrides), ids)
    loss_r, grads_r, _, _ = step_gradients(tiny_config(*overrides, "train.remat=blocks"), ids,
                                           weights=weights)
    assert loss_r == pytest.approx(loss, rel=1e-6)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(grads, grads_r)) <= 1e-5


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_dropout_masks_differ_across_replicas(ids):
    """Both replicas get the same rows: with dropout their losses differ (own masks), without
    dropout they are equal."""
    same = np.concatenate([ids[:8], ids[:8]])
    _, _, no_dropout, _ = step_gradients(tiny_config(*SPLITS["mirrored"]), same)
    _, _, dropout, _ = step_gradients(tiny_config(*SPLITS["mirrored"], "model.dropout=0.1"), same)
    assert no_dropout[0] == pytest.approx(no_dropout[1], rel=1e-6)
    assert abs(dropout[0] - dropout[1]) > 1e-4


def graph_size(concrete) -> int:
    graph_def = concrete.graph.as_graph_def()
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_accumulation_graph_does_not_grow_with_k(shards):
    """A tf.while_loop over micro-batches: the traced graph is the same size for k=2 and k=8
    (k=1 takes the loop-free path). A Python loop would grow it ~k-fold."""
    sizes = []
    for k in (2, 8):
        config = tiny_config("runtime.strategy=one_device", f"train.accumulation_steps={k}")
        strategy = make_strategy(config.runtime)
        model, state, optimizer, _ = loop.build_training(config, strategy)
        step = train_step.make_train_step(model, optimizer, strategy, state, global_batch_size=16,
                                          accumulation_steps=k, clip_norm=1.0,
                                          dynamic_loss_scale=False, pad_id=PAD_ID)
        iterator = iter(input_lib.make_dataset(shards["train"], SEQ_LEN, 16))
        sizes.append(graph_size(step.get_concrete_function(iterator)))
    assert sizes[0] == sizes[1]


@pytest.mark.slow
def test_two_workers_match_reference(ids, tmp_path, worker_server):
    """MultiWorkerMirroredStrategy (2 processes on loopback, TF_CONFIG: forks of the session's
    worker_server, tests/training/conftest.py) x 2 micro-batches."""
    config = tiny_config("runtime.strategy=one_device")
    keras.utils.set_random_seed(config.train.seed)
    weights = build_model(config.model, SEQ_LEN, vocab_size=VOCAB_SIZE).get_weights()
    np.savez(tmp_path / "in.npz", ids=ids, *weights)
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        procs.append(worker_server.start_module("tests.training.multi_worker_gradients", [
            str(tmp_path / "in.npz"), str(tmp_path / f"out{index}.npz")], env=env))
    try:
        for proc in procs:
            code, _, err = worker_server.wait(proc)
            assert code == 0, err[-3000:]
    finally:
        worker_server.kill(procs)   # a peer of a failed or hung worker would wait for it forever
    ref_loss, ref_grads = reference(config, weights, ids)
    for index in range(2):
        out = np.load(tmp_path / f"out{index}.npz")
        grads = [out[f"arr_{i}"] for i in range(len(ref_grads))]
        assert abs(float(out["loss"]) - ref_loss) / ref_loss <= FLOAT32_TOLERANCE
        assert relative_error(grads, ref_grads) <= FLOAT32_TOLERANCE
