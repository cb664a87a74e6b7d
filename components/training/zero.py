"""Optimizer state sharded across data-parallel replicas (ZeRO stage 1), for `mirrored` and
`multi_worker_mirrored`.

With `train.shard_optimizer_state=true` each of the R replicas keeps the AdamW moments (m, v) of
its own 1/R slice of every parameter only, instead of both moments of all parameters:

  for each trainable variable w (n elements), flattened and zero-padded to R * ceil(n / R):
      replica r owns elements [r * s, (r + 1) * s), s = ceil(n / R)     (R need not divide n)
  after the train step's gradient all-reduce (every replica holds the global gradient g),
  in replica context (inside strategy.run), r = the replica's global id in the sync group:
      w_r = slice_r(w) - slice_r(w) * wd * lr                            (decayed roles)
      m_r, v_r <- AdamW moments of slice_r(g)
      w_r <- w_r - m_r * alpha / (sqrt(v_r) + eps)
      all_gather over replicas (one collective for all variables): every replica gets the R
      updated slices; the step's merge_call assigns the whole value to the mirrored weights.

A step whose gradient is not finite keeps the old moments and weights (tf.where, not tf.cond: a
collective may not sit in a cond branch in replica context under MirroredStrategy).

The arithmetic is Keras AdamW's (keras/src/optimizers/adamw.py update_step, weight decay first),
so a sharded run equals the unsharded one up to float rounding (tests/training/test_zero.py).

Reduction: tf.distribute offers no reduce-scatter on any strategy's public API (ReplicaContext
has all_reduce and all_gather; CPU replicas reduce through the host with ReductionToOneDevice),
so the gradient is all-reduced (as in the unsharded step) and each replica slices its part
locally. The saving is the optimizer state (8 N bytes -> 8 N / R per replica); gradients stay
whole. Hand-written because Keras 3's optimizers keep one full slot per variable and its
sharding (keras.distribution) is JAX-only.

Where the slices live: plain variables, one set per LOCAL replica device (this process's
strategy.extended.worker_devices). Under multi_worker_mirrored each worker therefore holds the
moments of its own replicas' slices only, and its own checkpoint (the chief's folder, or
.worker-<i> for the others) saves exactly those, so each worker resumes its own slices exactly.
Resuming needs the same replica count (the slices' sizes depend on R).
"""

from __future__ import annotations

import math

import tensorflow as tf


def shard_size(elements: int, replicas: int) -> int:
    """Elements of one replica's slice: ceil(n / R); the last slice is zero-padded."""
    return max(1, math.ceil(elements / replicas))


class ShardedAdamW(tf.Module):
    """AdamW whose moments are split across the strategy's replicas (see the module docstring).

    Construct it OUTSIDE strategy.scope(): its moment slices are plain variables, one set per
    local replica device (under the scope they would become mirrored, i.e. whole everywhere)."""

    def __init__(self, strategy, variables, *, learning_rate, weight_decay: float, beta_1: float,
                 beta_2: float, epsilon: float = 1e-8, decayed=()):
        super().__init__(name="sharded_adamw")
        if tf.distribute.has_strategy():
            raise RuntimeError("ShardedAdamW must be built outside strategy.scope()")
        self.devices = tuple(strategy.extended.worker_devices)     # this process's replicas
        self.replicas = strategy.num_replicas_in_sync              # R over all workers
        self.learning_rate = learning_rate               # float or zero-argument callable
        self.weight_decay, self.beta_1, self.beta_2, self.epsilon = (
            weight_decay, beta_1, beta_2, epsilon)
        variables = list(variables)
        # Tracked for checkpoints: tf.train.Checkpoint(model=...) does not see Keras 3's list of
        # blocks; the Keras optimizer saves them through its variable list, so this one must too.
        self.model_variables = variables
        self.shapes = [tuple(v.shape) for v in variables]
        self.decay = [any(d is v for d in decayed) for v in variables]
        self.shard_sizes = [shard_size(math.prod(s), self.replicas) for s in self.shapes]
        with strategy.scope():       # applied steps (Adam's bias correction), like .iterations
            self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations",
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.momentums, self.velocities = [], []
        for local, device in enumerate(self.devices):
            with tf.device(device):
                self.momentums.append([tf.Variable(tf.zeros([k]), name=f"m_{local}_{i}")
                                       for i, k in enumerate(self.shard_sizes)])
                self.velocities.append([tf.Variable(tf.zeros([k]), name=f"v_{local}_{i}")
                                        for i, k in enumerate(self.shard_sizes)])

    def current_learning_rate(self):
        rate = self.learning_rate() if callable(self.learning_rate) else self.learning_rate
        return tf.cast(rate, tf.float32)

    def update_own_slice(self, grads, variables, finite):
        """Replica context, after the all-reduce: update this replica's slices (moments in
        place, unless `finite` is false) and all-gather the weights. Returns every variable's
        new whole value (the same on every replica); the caller assigns them (assign_gathered)."""
        context = tf.distribute.get_replica_context()
        replica = tf.get_static_value(context.replica_id_in_sync_group)    # global id
        local = replica % len(self.devices)     # MultiWorkerMirrored: task * local + local index
        lr = self.current_learning_rate()
        step = tf.cast(self.iterations + 1, tf.float32)
        alpha = lr * tf.sqrt(1 - tf.pow(tf.constant(self.beta_2, tf.float32), step)) / (
            1 - tf.pow(tf.constant(self.beta_1, tf.float32), step))
        slices = [self._update_slice(i, replica, local, tf.convert_to_tensor(variable), grad,
                                     finite, lr, alpha)
                  for i, (variable, grad) in enumerate(zip(variables, grads))]
        gathered = context.all_gather(tf.concat(slices, axis=0)[None], axis=0)   # (R, sum s_i)
        values, offset = [], 0
        for variable, size, shape in zip(variables, self.shard_sizes, self.shapes):
            whole = tf.reshape(gathered[:, offset:offset + size], [-1])[:math.prod(shape)]
            values.append(tf.cast(tf.reshape(whole, shape), variable.dtype))
            offset += size
        return values

    def _update_slice(self, i, replica, local, weight, grad, finite, lr, alpha):
        """AdamW on the global replica's slice of variable i; moments kept when not finite."""
        size = self.shard_sizes[i]
        padded = size * self.replicas

        def own(x):
            flat = tf.reshape(tf.cast(x, tf.float32), [-1])
            return tf.pad(flat, [[0, padded - tf.size(flat)]])[replica * size:(replica + 1) * size]
        old_w, g = own(weight), own(grad)
        w = old_w
        if self.decay[i]:
            w = w - w * tf.constant(self.weight_decay, tf.float32) * lr
        m, v = self.momentums[local][i], self.velocities[local][i]
        new_m = m + (g - m) * (1 - self.beta_1)
        new_v = v + (tf.square(g) - v) * (1 - self.beta_2)
        m.assign(tf.where(finite, new_m, m))
        v.assign(tf.where(finite, new_v, v))
        return tf.where(finite, w - (new_m * alpha) / (tf.sqrt(new_v) + self.epsilon), old_w)

    def assign_gathered(self, distribution, values, variables) -> None:
        """Cross-replica context (the step's merge_call): each local copy of every mirrored
        variable takes its replica's gathered value; one more applied step for Adam."""
        for variable, value in zip(variables, values):
            distribution.extended.update(getattr(variable, "value", variable),
                                         lambda var, x: var.assign(x), args=(value,), group=False)
        self.iterations.assign_add(1)
