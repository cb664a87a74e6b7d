"""Learning rate: linear warmup to the peak, then cosine decay to the floor at the last step."""

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
