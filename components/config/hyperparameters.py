"""Hyper-parameter values (dotted config keys, as the Tuner records them) applied over a Config
through the same typed merge as `--set`. Here, not in the tuner stage, because the Trainer applies
the Tuner's best values too and training sits below the tuner."""

from __future__ import annotations

from dataclasses import replace

from components.config.loading import merge
from components.config.rules import validate_finite, validate_model_and_train
from components.config.tree import Config

# KerasTuner bookkeeping values (hyperband's rounds), not config keys.
TUNER_INTERNAL_PREFIX = "tuner/"


def config_values(values: dict) -> dict:
    """Only the entries that are config keys (drops KerasTuner's `tuner/...` bookkeeping)."""
    return {k: v for k, v in values.items() if not k.startswith(TUNER_INTERNAL_PREFIX)}


def apply_hyperparameters(config: Config, values: dict) -> Config:
    """The config with dotted `values` applied through the same typed merge as `--set`.

    The learning-rate floor follows the peak (min_learning_rate keeps its ratio to it), and a
    warm-up that does not fit the step budget is clipped, so every sampled point is valid."""
    values = config_values(values)
    nested: dict = {}
    for dotted, value in values.items():
        section, key = dotted.split(".", 1)
        nested.setdefault(section, {})[key] = value
    updated = merge(config, nested)
    t = updated.train
    if "train.learning_rate" in values:
        ratio = config.train.min_learning_rate / config.train.learning_rate
        t = replace(t, min_learning_rate=t.learning_rate * ratio)
    if t.warmup_steps >= t.train_steps:
        t = replace(t, warmup_steps=t.train_steps - 1)
    updated = replace(updated, train=t)
    # The sections tuned values reach (model, train); the whole config was validated with its
    # tune.space before any stage, and a stage's config holds only the sections it reads.
    validate_finite(updated.model, "model.")
    validate_finite(updated.train, "train.")
    validate_model_and_train(updated)
    return updated
