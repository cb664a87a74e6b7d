"""The optimizer and its learning-rate schedule, built from the train section in one place:
`make_optimizer(train_config, model, step=..., strategy=...)` is what the loop asks for.

The learning rate is a pure function of the step counter (so a resumed run continues exactly):
`cosine` (linear warmup, cosine decay to the floor at the last step) or `wsd`
(warmup-stable-decay: linear warmup, the peak held, then a 1 - sqrt decay to the floor over the
last train.decay_fraction of the steps). 1 - sqrt rather than linear: it matched or beat cosine
in Hägele et al. 2024 ("Scaling Laws and Compute-Optimal Training Beyond Fixed Training
Durations", section 3), where linear decay fell short of it.

The optimizer is AdamW: Keras's (PreReducedAdamW: gradients arrive all-reduced by the train
step, the step's scalars computed once per device), or with train.shard_optimizer_state the
ZeRO-1 twin whose moments are split across replicas (zero.ShardedAdamW)."""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops


def learning_rate_at(step, peak: float, floor: float, warmup_steps: int, total_steps: int):
    """lr(step) for step = 0, 1, ...: (step + 1) / warmup x peak during warmup, then
    floor + (peak - floor) x (1 + cos(pi x progress)) / 2, progress going 0 -> 1."""
    step = tf.cast(step, tf.float32)
    warm = peak * (step + 1.0) / max(warmup_steps, 1)
    progress = tf.clip_by_value((step - warmup_steps) / max(total_steps - warmup_steps - 1, 1), 0.0, 1.0)
    cosine = floor + (peak - floor) * 0.5 * (1.0 + tf.cos(math.pi * progress))
    return tf.where(step < warmup_steps, warm, cosine)


def decay_start(total_steps: int, decay_fraction: float) -> int:
    """The first step of wsd's decay: the last round(decay_fraction x total) steps decay (>= 1)."""
    return total_steps - max(round(decay_fraction * total_steps), 1)


def wsd_learning_rate_at(step, peak: float, floor: float, warmup_steps: int, total_steps: int,
                         decay_fraction: float):
    """lr(step) for step = 0, 1, ...: (step + 1) / warmup x peak during warmup; peak until
    decay_start; then floor + (peak - floor) x (1 - sqrt(progress)), progress going 0 at
    decay_start -> 1 at the last step (total_steps - 1). Warmup wins where the two overlap."""
    step = tf.cast(step, tf.float32)
    start = decay_start(total_steps, decay_fraction)
    warm = peak * (step + 1.0) / max(warmup_steps, 1)
    progress = tf.clip_by_value((step - start) / max(total_steps - start - 1, 1), 0.0, 1.0)
    decayed = floor + (peak - floor) * (1.0 - tf.sqrt(progress))
    return tf.where(step < warmup_steps, warm, decayed)


@keras.saving.register_keras_serializable("bigtrain")
class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, peak: float, floor: float, warmup_steps: int, total_steps: int):
        self.peak, self.floor = peak, floor
        self.warmup_steps, self.total_steps = warmup_steps, total_steps

    def __call__(self, step):
        return learning_rate_at(step, self.peak, self.floor, self.warmup_steps, self.total_steps)

    def get_config(self):
        return dict(peak=self.peak, floor=self.floor, warmup_steps=self.warmup_steps,
                    total_steps=self.total_steps)


@keras.saving.register_keras_serializable("bigtrain")
class WarmupStableDecay(WarmupCosine):
    def __init__(self, peak: float, floor: float, warmup_steps: int, total_steps: int,
                 decay_fraction: float):
        super().__init__(peak, floor, warmup_steps, total_steps)
        self.decay_fraction = decay_fraction

    def __call__(self, step):
        return wsd_learning_rate_at(step, self.peak, self.floor, self.warmup_steps,
                                    self.total_steps, self.decay_fraction)

    def get_config(self):
        return dict(super().get_config(), decay_fraction=self.decay_fraction)


def make_schedule(train_config):
    """The schedule train.lr_schedule names, from the train.* settings."""
    t = train_config
    if t.lr_schedule == "wsd":
        return WarmupStableDecay(t.learning_rate, t.min_learning_rate, t.warmup_steps,
                                 t.train_steps, t.decay_fraction)
    return WarmupCosine(t.learning_rate, t.min_learning_rate, t.warmup_steps, t.train_steps)


class _PreReduced:
    """An optimizer that trusts its gradients to be summed over replicas already (train_step does
    the all-reduce itself, before clipping). Without this Keras would all-reduce them again."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


class _StepScalarsOnce:
    """Keras AdamW's update with the step's scalars computed once per step and device. Keras
    evaluates the learning rate (our schedule: tens of ops), the bias corrections and alpha inside
    the update of every variable on every replica: ~20 graph ops per variable and replica, traced
    in Python, where one copy per device serves them all (trace cost only: docs/benchmarks.md).
    The arithmetic, its order and dtypes are Keras 3.12's (keras/src/optimizers/adam.py
    update_step, keras/src/backend/tensorflow/optimizer.py _apply_weight_decay): the weights are
    bit-identical (tests/training/test_train_step.py). Both run in cross-replica context (one
    merge_call for all replicas): the caches are locals of that call, not state between replicas."""

    def _apply_weight_decay(self, variables):
        if self.weight_decay is None:
            return

        def decay_all(distribution, variables):
            lrs = {}

            def decay(variable):
                if self._use_weight_decay(variable):
                    key = (variable.dtype, variable.device)
                    if key not in lrs:   # the schedule, once per device
                        lrs[key] = tf.cast(self.learning_rate, variable.dtype)
                    wd = tf.cast(self.weight_decay, variable.dtype)
                    variable.assign_sub(variable * wd * lrs[key])

            for variable in variables:
                variable = variable.value if isinstance(variable, keras.Variable) else variable
                distribution.extended.update(variable, decay, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            decay_all, self._distribution_strategy, variables)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        alphas = {}

        def alpha_for(variable, learning_rate):
            key = (variable.dtype, variable.device)
            if key not in alphas:
                lr = ops.cast(learning_rate, variable.dtype)
                local_step = ops.cast(self.iterations + 1, variable.dtype)
                beta_1_power = ops.power(ops.cast(self.beta_1, variable.dtype), local_step)
                beta_2_power = ops.power(ops.cast(self.beta_2, variable.dtype), local_step)
                alphas[key] = lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
            return alphas[key]

        def update(variable, gradient, learning_rate):
            alpha = alpha_for(variable, learning_rate)
            gradient = ops.cast(gradient, variable.dtype)
            m = self._momentums[self._get_variable_index(variable)]
            v = self._velocities[self._get_variable_index(variable)]
            self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
            self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
            self.assign_sub(variable, ops.divide(ops.multiply(m, alpha),
                                                 ops.add(ops.sqrt(v), self.epsilon)))

        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, update, args=(gradient, learning_rate),
                                         group=False)


class PreReducedAdamW(_StepScalarsOnce, _PreReduced, keras.optimizers.AdamW):
    pass


def make_optimizer(train_config, model=None, *, step=None, strategy=None, learning_rate=None):
    """AdamW for `train_config` (the train section), its learning rate the schedule
    train.lr_schedule names (make_schedule) read at `step`, the step counter (TrainState.step:
    skipped steps included, not optimizer.iterations, the applied steps Adam's bias correction
    needs; None: the optimizer's own iterations). `learning_rate`: a float or a zero-argument
    callable in place of the schedule (tests, benchmarks). With `model`: weight decay by variable
    role (gpt.decay_variables: Dense kernels, embeddings per train.decay_embeddings); every other
    trainable variable (biases, norm scales and offsets) is excluded, whatever it is called.
    With `strategy` (and `model`): built for it, its slots created: under its scope, or with
    train.shard_optimizer_state the ZeRO-1 optimizer (zero.py), outside the scope (its slices
    are placed on each replica's device by itself; the scope would mirror every variable)."""
    if learning_rate is None:
        schedule = make_schedule(train_config)
        learning_rate = schedule if step is None else (lambda: schedule(step))
    if strategy is not None and train_config.shard_optimizer_state:
        return _sharded_optimizer(train_config, learning_rate, model, strategy)
    if strategy is None:
        return _adamw(train_config, learning_rate, model)
    with strategy.scope():
        optimizer = _adamw(train_config, learning_rate, model)
        if model is not None:
            optimizer.build(model.trainable_variables)
    return optimizer


def _adamw(train_config, learning_rate, model) -> keras.optimizers.Optimizer:
    """PreReducedAdamW with the train section's hyperparameters, decay by role with `model`."""
    optimizer = PreReducedAdamW(learning_rate=learning_rate, weight_decay=train_config.weight_decay,
                                beta_1=train_config.adam_beta1, beta_2=train_config.adam_beta2,
                                epsilon=1e-8)
    if model is not None:
        from components.model.gpt import decay_variables
        decayed = {optimizer._var_key(v) for v in
                   decay_variables(model, getattr(train_config, "decay_embeddings", True))}
        excluded = [v for v in model.trainable_variables if optimizer._var_key(v) not in decayed]
        if excluded:
            optimizer.exclude_from_weight_decay(var_list=excluded)
    return optimizer


def _sharded_optimizer(train_config, learning_rate, model, strategy):
    """The sharded twin of _adamw (zero.ShardedAdamW): same hyperparameters, decay by role."""
    from components.model.gpt import decay_variables
    from components.training.zero import ShardedAdamW
    return ShardedAdamW(strategy, model.trainable_variables, learning_rate=learning_rate,
                        weight_decay=train_config.weight_decay, beta_1=train_config.adam_beta1,
                        beta_2=train_config.adam_beta2, epsilon=1e-8,
                        decayed=decay_variables(model, train_config.decay_embeddings))
