"""One optimizer step: gradient accumulation over micro-batches, correct under MirroredStrategy,
global-norm clipping of the true global gradient, dynamic loss scaling, non-finite steps skipped.

Why not model.fit: on this stack Keras sums gradients across replicas in some versions and not in
others, clips each replica's partial gradient *before* the cross-replica sum (so the clipping norm
is wrong under MirroredStrategy), its built-in gradient_accumulation_steps raises a merge_call
RuntimeError under MirroredStrategy, and it turns XLA off under any strategy. This step owns all:

  per replica r: its share, rows [r k b, (r + 1) k b) of the global batch (input.py's rule)
  N = all_reduce_SUM_r(non-pad targets of share r): the count over the whole global batch
  per replica r, micro-batch i (k micro-batches of b sequences, T targets each):
      loss_ri = sum(CE(logits, targets) * not_pad) / N
      g_r     = sum_i grad(loss_ri * loss_scale)        # tf.while_loop over i: one traced body
  g = all_reduce_SUM_r(g_r) / loss_scale                # = grad of the global mean token loss
  if all(isfinite(g)): AdamW.apply(clip_by_global_norm(g))  else: skip, count, halve the scale

Dividing every micro-batch by the same global N makes the loss a plain sum over tokens, so any
replica x micro-batch split gives the gradient of the one global loss up to float rounding, and
the train loss is the metrics' loss (sum of token losses / non-pad tokens). Dropout masks come
from stateless seeds fold(seed, step, replica, micro-batch): different per replica, recomputed
identically under remat, reproduced on resume (the step counter is checkpointed).
With xla=True the per-replica forward/backward (the whole micro-batch loop) is one jit-compiled
function; the data fetch, all-reduce, clipping and optimizer stay outside it.
"""

from __future__ import annotations

import tensorflow as tf


LOSS_SCALE_INITIAL = 2.0**15
LOSS_SCALE_GROWTH_INTERVAL = 2000  # finite steps in a row before the loss scale doubles
# The cross-replica reduction of gradients and loss. Module-level so the mutation tests in
# tests/training/test_gradients.py can swap in MEAN and show the equivalence tests catch it.
GRADIENT_REDUCTION = tf.distribute.ReduceOp.SUM


def unscale(grads, scale):
    """Undo the loss scale (a no-op at scale 1). Module-level for the mutation tests."""
    return [g / scale for g in grads]


class TrainState(tf.Module):
    """Counters that live in checkpoints next to the weights. Create under strategy.scope()."""

    def __init__(self):
        super().__init__(name="train_state")
        agg = tf.VariableAggregation.ONLY_FIRST_REPLICA
        # The one step counter: the schedule, the dropout seeds and the stop condition read it;
        # it counts skipped steps too (optimizer.iterations counts applied ones, for Adam).
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg, name="step")
        self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg,
                                         name="skipped_steps")
        self.loss_scale = tf.Variable(LOSS_SCALE_INITIAL, dtype=tf.float32, trainable=False,
                                      aggregation=agg, name="loss_scale")
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg,
                                      name="good_steps")
        # train.spike_rollback: rollbacks so far, and the global batches they skipped (the input
        # reads that many more batches than the step counter says: a resume must too).
        self.rollbacks = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg,
                                     name="rollbacks")
        self.skipped_batches = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=agg,
                                           name="skipped_batches")
        # The loss of the last step before a checkpoint: what a run resumed at its end reports.
        self.last_loss = tf.Variable(float("nan"), dtype=tf.float32, trainable=False,
                                     aggregation=agg, name="last_loss")
        # train.eval_every: the best validation so far (components/training/validation.py), so a
        # resumed run's keep-best knows it. float64: the loss exactly as compared and reported.
        self.best_validation_loss = tf.Variable(float("inf"), dtype=tf.float64, trainable=False,
                                                aggregation=agg, name="best_validation_loss")
        self.best_validation_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                                aggregation=agg, name="best_validation_step")


def masked_token_loss_sum(targets, logits, pad_id: int):
    """Sum of next-token cross-entropy over non-pad targets. targets (B, T) int, logits (B, T, V)."""
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)  # (B, T)
    return tf.reduce_sum(ce * tf.cast(tf.not_equal(targets, pad_id), ce.dtype))


def target_count(targets, pad_id: int):
    """Non-pad targets: the loss's denominator (float32, >= 1 so an all-pad batch gives 0 loss)."""
    return tf.maximum(tf.reduce_sum(tf.cast(tf.not_equal(targets, pad_id), tf.float32)), 1.0)


def dropout_seed(base_seed: int, step, replica, micro):
    """int64[2] seed of one micro-batch's dropout masks: a pure function of the run's seed, the
    step counter, the replica (global id, so masks differ across replicas) and the micro-batch."""
    seed = tf.stack([tf.constant(base_seed, tf.int64), tf.cast(step, tf.int64)])
    for value in (replica, micro):
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(value, tf.int64))
    return seed


def _share(inputs, targets, replica, share: int, global_batch_size: int):
    """This replica's rows. The loop's per-replica input (input.distribute) hands each replica
    its share already; a caller may instead hand every replica the whole global batch (the
    gradient tests feed one fixed batch), and the replica takes its contiguous share
    [replica * share, (replica + 1) * share), the same rows input.distribute would give it."""
    rows = inputs.shape[0]
    if rows is None:  # a multi-worker distributed iterator leaves the batch dimension unknown
        return tf.ensure_shape(inputs, [share, None]), tf.ensure_shape(targets, [share, None])
    if rows == share:
        return inputs, targets
    if rows == global_batch_size:
        start = replica * share
        return inputs[start:start + share], targets[start:start + share]
    raise ValueError(f"a replica received {rows} sequences: expected its share ({share}) or the "
                     f"global batch ({global_batch_size})")


def make_gradient_fn(model, strategy, state: TrainState, *, global_batch_size: int,
                     accumulation_steps: int, dynamic_loss_scale: bool, seed: int = 0,
                     xla: bool = False, pad_id: int):
    """replica_gradients(inputs, targets) in replica context -> (loss, grads, replica_loss):
    the all-reduced, unscaled gradient of the global mean token loss, before clipping; the loss;
    this replica's own (un-reduced) share of it. The train step and the tests share this code."""
    replicas = strategy.num_replicas_in_sync
    share = global_batch_size // replicas                     # sequences per replica, k * b
    micro_batch_size = share // accumulation_steps            # b
    variables = model.trainable_variables

    def accumulate(inputs, targets, count, scale, step, replica):
        """(k*b, T) ids -> (sum_i loss_i, sum_i grad(loss_i * scale)) for this replica's share."""
        shape = [accumulation_steps, micro_batch_size, -1]
        inputs, targets = tf.reshape(inputs, shape), tf.reshape(targets, shape)  # (k, b, T)

        def micro_step(i):                              # -> (loss_i, grad(loss_i * scale))
            with tf.GradientTape() as tape:
                logits = model(inputs[i], training=True,
                               seed=dropout_seed(seed, step, replica, i))   # (b, T, V) float32
                micro_loss = masked_token_loss_sum(targets[i], logits, pad_id) / count
                scaled = micro_loss * scale
            grads = tape.gradient(scaled, variables)
            return micro_loss, [tf.cast(tf.convert_to_tensor(g), v.dtype) for g, v in zip(grads, variables)]

        def body(i, loss, grads):
            micro_loss, new = micro_step(i)
            return i + 1, loss + micro_loss, [a + g for a, g in zip(grads, new)]

        if accumulation_steps == 1:                     # k is static: no loop to pay for
            return micro_step(0)
        # A while loop, not a Python loop: the graph (and trace time) do not grow with k.
        zeros = [tf.zeros(v.shape, v.dtype) for v in variables]
        _, loss, grads = tf.while_loop(lambda i, *_: i < accumulation_steps, body,
                                       [tf.constant(0), tf.constant(0.0), zeros],
                                       parallel_iterations=1)
        return loss, grads

    if xla:
        accumulate = tf.function(accumulate, jit_compile=True)

    def replica_gradients(inputs, targets):   # (share, T) each, or (global batch, T): see _share
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group
        inputs, targets = _share(inputs, targets, replica, share, global_batch_size)
        local_count = tf.reduce_sum(tf.cast(tf.not_equal(targets, pad_id), tf.float32))
        # N over the global batch. Always SUM (not GRADIENT_REDUCTION): the MEAN mutation must
        # not cancel itself by halving N too. >= 1 so an all-pad batch gives 0 loss.
        count = tf.maximum(context.all_reduce(tf.distribute.ReduceOp.SUM, local_count), 1.0)
        scale = state.loss_scale.read_value() if dynamic_loss_scale else tf.constant(1.0)
        local_loss, grads = accumulate(inputs, targets, count, scale, state.step.read_value(),
                                       replica)
        # Every replica now holds the gradient of the global-batch loss (and the loss itself).
        grads, loss = context.all_reduce(GRADIENT_REDUCTION, [grads, local_loss])
        return loss, unscale(grads, scale), local_loss

    return replica_gradients


def _count_good_step(state: TrainState, dynamic_loss_scale: bool) -> None:
    """An applied step: the loss scale doubles after LOSS_SCALE_GROWTH_INTERVAL good steps."""
    state.good_steps.assign_add(1)
    if dynamic_loss_scale:
        grow = state.good_steps >= LOSS_SCALE_GROWTH_INTERVAL
        state.loss_scale.assign(tf.where(grow, state.loss_scale * 2.0, state.loss_scale))
        state.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), state.good_steps))


def _count_skipped_step(state: TrainState, dynamic_loss_scale: bool) -> None:
    """A non-finite gradient: no update, the loss scale halves (never below 1)."""
    state.skipped_steps.assign_add(1)
    state.good_steps.assign(0)
    if dynamic_loss_scale:
        state.loss_scale.assign(tf.maximum(state.loss_scale / 2.0, 1.0))


def make_train_step(model, optimizer, strategy, state: TrainState, *, global_batch_size: int,
                    accumulation_steps: int, clip_norm: float | None,
                    dynamic_loss_scale: bool, seed: int = 0, xla: bool = False,
                    pad_id: int, gradient_fn=None):
    """Returns a tf.function(iterator) -> (global loss, gradient norm, finite) for one step.
    clip_norm=None: no clipping (the SGD reference check). gradient_fn: a replacement for
    make_gradient_fn's (pipeline stages: pipeline_stages.make_pipeline_gradient_fn)."""
    variables = model.trainable_variables
    replica_gradients = gradient_fn or make_gradient_fn(
        model, strategy, state, global_batch_size=global_batch_size,
        accumulation_steps=accumulation_steps, dynamic_loss_scale=dynamic_loss_scale, seed=seed,
        xla=xla, pad_id=pad_id)

    sharded = hasattr(optimizer, "update_own_slice")   # ZeRO-1 (zero.ShardedAdamW)

    def apply_or_skip(distribution, grads, finite):
        # Cross-replica context (inside merge_call): a cond here may branch around the optimizer's
        # own merge_call, which a cond in replica context may not. With sharded state `grads` are
        # the new weights, already computed in replica context (and unchanged if not finite).
        finite = distribution.experimental_local_results(finite)[0]

        def apply():
            if sharded:
                optimizer.assign_gathered(distribution, grads, variables)
            else:
                distribution.extended.call_for_each_replica(
                    lambda g: optimizer.apply(g, variables), args=(grads,))
            _count_good_step(state, dynamic_loss_scale)
            return tf.constant(True)

        def skip():
            _count_skipped_step(state, dynamic_loss_scale)
            return tf.constant(False)

        tf.cond(finite, apply, skip)
        state.step.assign_add(1)          # after apply: the schedule read this step's value

    def replica_step(inputs, targets):
        loss, grads, _ = replica_gradients(inputs, targets)
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
        grad_norm = tf.linalg.global_norm(grads)
        if clip_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=grad_norm)
        if sharded:   # each replica updates its own slice, then all-gather (zero.py)
            grads = optimizer.update_own_slice(grads, variables, finite)
        tf.distribute.get_replica_context().merge_call(apply_or_skip, args=(grads, finite))
        return loss, grad_norm, finite

    # autograph=False: every branch and loop here is explicit (tf.cond, tf.while_loop; Python ifs
    # on static settings): converting the source buys nothing, and it cost a process's first
    # step 1.0-1.6 CPU-s of 4.8-9.1 (benchmarks/trace_cost.py, docs/benchmarks.md).
    @tf.function(autograph=False)
    def train_step(iterator):
        # The loop's iterator (input.distribute) yields each replica its share, on its device; a
        # plain iterator of global batches also works (each replica then slices its share).
        inputs, targets = next(iterator)
        results = strategy.run(replica_step, args=(inputs, targets))
        return [strategy.experimental_local_results(r)[0] for r in results]

    return train_step
