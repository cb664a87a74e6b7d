"""Learning rate, a pure function of the step counter (so a resumed run continues exactly):
`cosine` (linear warmup, cosine decay to the floor at the last step) or `wsd`
(warmup-stable-decay: linear warmup, the peak held, then a 1 - sqrt decay to the floor over the
last train.decay_fraction of the steps). 1 - sqrt rather than linear: it matched or beat cosine
in Hägele et al. 2024 ("Scaling Laws and Compute-Optimal Training Beyond Fixed Training
Durations", section 3), where linear decay fell short of it."""

from __future__ import annotations

import math

import keras
import tensorflow as tf


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
