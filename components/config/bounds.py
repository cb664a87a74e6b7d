"""Values outside their meaning, and names that become path parts: config errors naming the key
(rules.py calls these; split from it to keep each module one screenful of rules per topic)."""

from __future__ import annotations

import re

from components.config.tree import Config, ConfigError


def one_of(key: str, value, choices: tuple) -> None:
    """ConfigError naming the key when value is not one of choices."""
    if value not in choices:
        raise ConfigError(f"{key}: {value!r} is not one of {choices}")


# One path part: it names a folder (<serving>/<model.name>/<version>, <root>/<pipeline_name>).
# No separators, no "." or "..", nothing a shell or a URL would have to quote.
PATH_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_optimizer(config: Config) -> None:
    """AdamW and clipping within their meaning: a clip norm of 0 zeroes every update (the run
    "completes" untrained), betas are decay rates in [0, 1), decay and the floor rate >= 0."""
    t = config.train
    if not t.clip_norm > 0:
        raise ConfigError(f"train.clip_norm: must be > 0 (the global gradient norm is clipped to "
                          f"it; 0 would zero every update), got {t.clip_norm}")
    for key, value in (("train.adam_beta1", t.adam_beta1), ("train.adam_beta2", t.adam_beta2)):
        if not 0.0 <= value < 1.0:
            raise ConfigError(f"{key}: must be in [0, 1) (a moving average's decay), got {value}")
    for key, value in (("train.weight_decay", t.weight_decay),
                       ("train.min_learning_rate", t.min_learning_rate)):
        if value < 0:
            raise ConfigError(f"{key}: must be >= 0, got {value}")


# Steps and batch sizes become int32 tensors and shapes in TensorFlow: train.train_steps=10**29
# passed the config and failed inside the run with a ValueError that named no key.
MAX_COUNT = 2**31 - 1
TRAIN_COUNTS = ("train_steps", "global_batch_size", "accumulation_steps", "warmup_steps",
                "checkpoint_every", "log_every", "eval_every", "eval_batches")


def validate_counts(config: Config) -> None:
    for name in TRAIN_COUNTS:
        value = getattr(config.train, name)
        if value > MAX_COUNT:
            raise ConfigError(f"train.{name}: at most {MAX_COUNT} (an int32 in TensorFlow), got "
                              f"{value}")


def validate_path_parts(config: Config) -> None:
    """Names used as one folder name stay one safe folder name: `--set model.name=..` pushed to
    <serving>/../<version> and wrote models.config into the home root."""
    if not config.paths.home:
        raise ConfigError("paths.home: empty; name a folder (the default is ./bigtrain_home)")
    for key, value in (("model.name", config.model.name),
                       ("paths.pipeline_name", config.paths.pipeline_name)):
        if not PATH_PART.fullmatch(value):
            raise ConfigError(f"{key}: {value!r} is not one folder name (letters, digits, '.', "
                              "'_' and '-', starting with a letter or digit, at most 64)")
