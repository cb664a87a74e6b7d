"""One optimizer step: gradient accumulation over micro-batches, correct under MirroredStrategy,
global-norm clipping of the true global gradient, dynamic loss scaling, non-finite steps skipped.

Why not model.fit: on this stack Keras sums gradients across replicas in some versions and not in
others, clips each replica's partial gradient *before* the cross-replica sum (so the clipping norm
is wrong under MirroredStrategy), and its built-in gradient_accumulation_steps raises a merge_call
RuntimeError under MirroredStrategy. The step below owns all three decisions:

  per replica r, micro-batch i (k micro-batches of b sequences, T targets each):
      loss_ri = sum(CE(logits, targets) * not_pad) / (global_batch_size * T)
      g_r     = sum_i grad(loss_ri * loss_scale)        # a Python loop over a static k
  g = all_reduce_sum_r(g_r) / loss_scale                # = grad of the global-batch mean loss
  if all(isfinite(g)): AdamW.apply(clip_by_global_norm(g))  else: skip, count, halve the scale

Normalizing by the fixed number of target positions (not by the varying count of non-pad
targets) makes the loss a plain sum over examples, so any split of the global batch over replicas
and micro-batches gives the same gradient up to float rounding.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from components.text_example_gen.tokenizer import PAD_ID

LOSS_SCALE_INITIAL = 2.0**15
LOSS_SCALE_GROWTH_INTERVAL = 2000  # finite steps in a row before the loss scale doubles


class PreReducedAdamW(keras.optimizers.AdamW):
    """AdamW that trusts its gradients to be summed over replicas already (train_step does the
    all-reduce itself, before clipping). Without this Keras would all-reduce them a second time."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


def make_optimizer(train_config, learning_rate) -> keras.optimizers.Optimizer:
    optimizer = PreReducedAdamW(learning_rate=learning_rate, weight_decay=train_config.weight_decay,
                                beta_1=train_config.adam_beta1, beta_2=train_config.adam_beta2,
                                epsilon=1e-8)
    # Decay matrices and embeddings only, as in GPT-2: not biases, not LayerNorm scales/offsets.
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    return optimizer


class TrainState(tf.Module):
    """Counters that live in checkpoints next to the weights. Create under strategy.scope()."""

    def __init__(self):
        super().__init__(name="train_state")
        agg = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg, name="step")
        self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg,
                                         name="skipped_steps")
        self.loss_scale = tf.Variable(LOSS_SCALE_INITIAL, dtype=tf.float32, trainable=False,
                                      aggregation=agg, name="loss_scale")
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg,
                                      name="good_steps")
        # The loss of the last step before a checkpoint: what a run resumed at its end reports.
        self.last_loss = tf.Variable(float("nan"), dtype=tf.float32, trainable=False,
                                     aggregation=agg, name="last_loss")


def masked_token_loss_sum(targets, logits):
    """Sum of next-token cross-entropy over non-pad targets. targets (B, T) int, logits (B, T, V)."""
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)  # (B, T)
    return tf.reduce_sum(ce * tf.cast(tf.not_equal(targets, PAD_ID), ce.dtype))


def make_train_step(model, optimizer, strategy, state: TrainState, *, global_batch_size: int,
                    seq_len: int, accumulation_steps: int, clip_norm: float,
                    dynamic_loss_scale: bool):
    """Returns a tf.function(iterator) -> (global loss, gradient norm, finite) for one step."""
    replicas = strategy.num_replicas_in_sync
    micro_batch_size = global_batch_size // (replicas * accumulation_steps)
    positions = float(global_batch_size * seq_len)
    variables = model.trainable_variables

    def apply_or_skip(distribution, grads, finite):
        # Cross-replica context (inside merge_call): a cond here may branch around the optimizer's
        # own merge_call, which a cond in replica context may not.
        finite = distribution.experimental_local_results(finite)[0]

        def apply():
            distribution.extended.call_for_each_replica(
                lambda g: optimizer.apply(g, variables), args=(grads,))
            state.good_steps.assign_add(1)
            if dynamic_loss_scale:
                grow = state.good_steps >= LOSS_SCALE_GROWTH_INTERVAL
                state.loss_scale.assign(tf.where(grow, state.loss_scale * 2.0, state.loss_scale))
                state.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), state.good_steps))
            return tf.constant(True)

        def skip():
            state.skipped_steps.assign_add(1)
            state.good_steps.assign(0)
            if dynamic_loss_scale:
                state.loss_scale.assign(tf.maximum(state.loss_scale / 2.0, 1.0))
            return tf.constant(False)

        tf.cond(finite, apply, skip)
        state.step.assign_add(1)

    def replica_step(inputs, targets):                  # (global batch, T) each
        context = tf.distribute.get_replica_context()
        # This replica's contiguous share of the global batch: (k * b, T).
        share = global_batch_size // replicas
        start = context.replica_id_in_sync_group * share
        inputs, targets = inputs[start:start + share], targets[start:start + share]
        scale = state.loss_scale if dynamic_loss_scale else tf.constant(1.0)
        grads = [tf.zeros_like(v) for v in variables]
        loss = tf.constant(0.0)
        for i in range(accumulation_steps):             # static k: unrolled in the graph
            x = inputs[i * micro_batch_size:(i + 1) * micro_batch_size]
            y = targets[i * micro_batch_size:(i + 1) * micro_batch_size]
            with tf.GradientTape() as tape:
                logits = model(x, training=True)        # (b, T, V) float32
                micro_loss = masked_token_loss_sum(y, logits) / positions
                scaled = micro_loss * scale
            grads = [a + tf.cast(tf.convert_to_tensor(g), a.dtype) for a, g in
                     zip(grads, tape.gradient(scaled, variables))]
            loss += micro_loss
        # Every replica now holds the gradient of the global-batch loss (and the loss itself).
        grads, loss = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads, loss])
        grads = [g / scale for g in grads]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        grad_norm = tf.linalg.global_norm(grads)
        clipped, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=grad_norm)
        context.merge_call(apply_or_skip, args=(clipped, finite))
        return loss, grad_norm, finite

    @tf.function
    def train_step(iterator):
        # A plain tf.data iterator (checkpointable, unlike a distributed one) yields the global
        # batch; each replica slices its share, so the batch-to-replica split is explicit.
        inputs, targets = next(iterator)
        results = strategy.run(replica_step, args=(inputs, targets))
        return [strategy.experimental_local_results(r)[0] for r in results]

    return train_step
