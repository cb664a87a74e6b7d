"""Optimizer state sharded across data-parallel replicas (ZeRO stage 1), for `mirrored`.

With `train.shard_optimizer_state=true` each of the R replicas keeps the AdamW moments (m, v) of
its own 1/R slice of every parameter only, instead of both moments of all parameters:

  for each trainable variable w (n elements), flattened and zero-padded to R * ceil(n / R):
      replica r owns elements [r * s, (r + 1) * s), s = ceil(n / R)     (R need not divide n)
  after the train step's gradient all-reduce (every replica holds the global gradient g):
      replica r, on its own device:  w_r = slice_r(w) - slice_r(w) * wd * lr      (decayed roles)
                                     m_r, v_r <- AdamW moments of slice_r(g)
                                     w_r <- w_r - m_r * alpha / (sqrt(v_r) + eps)
      all-gather: every device concatenates the R updated slices into its copy of w

The arithmetic is Keras AdamW's (keras/src/optimizers/adamw.py update_step, weight decay first),
so a sharded run equals the unsharded one up to float rounding (tests/training/test_zero.py).

Reduction: tf.distribute offers no reduce-scatter on any strategy's public API (ReplicaContext
has all_reduce and all_gather; CPU replicas reduce through the host with ReductionToOneDevice),
so the gradient is all-reduced (as in the unsharded step) and each replica slices its part
locally. The saving is the optimizer state (8 N bytes -> 8 N / R per replica); gradients stay
whole. Hand-written because Keras 3's optimizers keep one full slot per variable and its
sharding (keras.distribution) is JAX-only.

The update runs in cross-replica context (inside the train step's merge_call), placing each
replica's work on that replica's device explicitly; so it is single-host (`mirrored`), which the
config rules enforce. Checkpoints hold every replica's slices (plain per-device variables), so a
resumed run continues exactly; resuming needs the same replica count.
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
    replica device (under the scope they would become mirrored, i.e. whole on every replica)."""

    def __init__(self, strategy, variables, *, learning_rate, weight_decay: float, beta_1: float,
                 beta_2: float, epsilon: float = 1e-8, decayed=()):
        super().__init__(name="sharded_adamw")
        if tf.distribute.has_strategy():
            raise RuntimeError("ShardedAdamW must be built outside strategy.scope()")
        self.devices = tuple(strategy.extended.worker_devices)
        self.learning_rate = learning_rate               # float or zero-argument callable
        self.weight_decay, self.beta_1, self.beta_2, self.epsilon = (
            weight_decay, beta_1, beta_2, epsilon)
        variables = list(variables)
        # Tracked for checkpoints: tf.train.Checkpoint(model=...) does not see Keras 3's list of
        # blocks; the Keras optimizer saves them through its variable list, so this one must too.
        self.model_variables = variables
        self.shapes = [tuple(v.shape) for v in variables]
        self.decay = [any(d is v for d in decayed) for v in variables]
        replicas = len(self.devices)
        self.shard_sizes = [shard_size(math.prod(s), replicas) for s in self.shapes]
        with strategy.scope():       # applied steps (Adam's bias correction), like .iterations
            self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations",
                                          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.momentums, self.velocities = [], []
        for r, device in enumerate(self.devices):
            with tf.device(device):
                self.momentums.append([tf.Variable(tf.zeros([k]), name=f"m_{r}_{i}")
                                       for i, k in enumerate(self.shard_sizes)])
                self.velocities.append([tf.Variable(tf.zeros([k]), name=f"v_{r}_{i}")
                                        for i, k in enumerate(self.shard_sizes)])

    def current_learning_rate(self):
        rate = self.learning_rate() if callable(self.learning_rate) else self.learning_rate
        return tf.cast(rate, tf.float32)

    def state_variables_by_device(self) -> dict[str, list[tf.Variable]]:
        """{device: the moment slices stored there} (the tests count elements per replica)."""
        return {device: list(m) + list(v) for device, m, v in
                zip(self.devices, self.momentums, self.velocities)}

    def apply_sharded(self, distribution, grads, variables) -> None:
        """Cross-replica context: grads are the all-reduced (clipped, unscaled) per-replica
        gradients, variables the model's mirrored trainable variables (same order as built)."""
        lr = self.current_learning_rate()
        step = tf.cast(self.iterations + 1, tf.float32)
        alpha = lr * tf.sqrt(1 - tf.pow(tf.constant(self.beta_2, tf.float32), step)) / (
            1 - tf.pow(tf.constant(self.beta_1, tf.float32), step))
        wd = tf.constant(self.weight_decay, tf.float32)
        for i, variable in enumerate(variables):
            components = distribution.experimental_local_results(getattr(variable, "value", variable))
            local_grads = distribution.experimental_local_results(grads[i])
            slices = [self._update_slice(i, r, components[r], local_grads[r], lr, wd, alpha)
                      for r in range(len(self.devices))]
            self._all_gather_into(components, slices, self.shapes[i])
        self.iterations.assign_add(1)

    def _update_slice(self, i, r, weight, grad, lr, wd, alpha):
        """Replica r's AdamW update of its slice of variable i, on replica r's device."""
        size = self.shard_sizes[i]
        padded = size * len(self.devices)
        with tf.device(self.devices[r]):
            def own(x):
                flat = tf.reshape(tf.cast(x, tf.float32), [-1])
                return tf.pad(flat, [[0, padded - tf.size(flat)]])[r * size:(r + 1) * size]
            w, g = own(weight), own(grad)
            if self.decay[i]:
                w = w - w * wd * lr
            m, v = self.momentums[r][i], self.velocities[r][i]
            m.assign_add((g - m) * (1 - self.beta_1))
            v.assign_add((tf.square(g) - v) * (1 - self.beta_2))
            return w - (m * alpha) / (tf.sqrt(v) + self.epsilon)

    def _all_gather_into(self, components, slices, shape) -> None:
        """Every replica's copy of the variable becomes the concatenation of the R slices."""
        elements = math.prod(shape)
        for device, component in zip(self.devices, components):
            with tf.device(device):
                whole = tf.concat(slices, axis=0)[:elements]
                component.assign(tf.reshape(tf.cast(whole, component.dtype), shape))


def make_sharded_optimizer(train_config, learning_rate, model, strategy) -> ShardedAdamW:
    """The sharded twin of train_step.make_optimizer: same hyperparameters, decay by role."""
    from components.model.gpt import decay_variables
    return ShardedAdamW(strategy, model.trainable_variables, learning_rate=learning_rate,
                        weight_decay=train_config.weight_decay, beta_1=train_config.adam_beta1,
                        beta_2=train_config.adam_beta2, epsilon=1e-8,
                        decayed=decay_variables(model, train_config.decay_embeddings))
