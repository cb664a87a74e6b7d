"""The tune section (`tune`): the Tuner stage's trials and its hyper-parameter search space
(`tune.space`), frozen dataclasses; the search itself is components/tuner/, the rules over these
values `validate_tuning` in rules.py, tuned values over a config hyperparameters.py. tree.py
re-exports it."""

from __future__ import annotations

from dataclasses import dataclass, field

TUNE_ALGORITHMS = ("random", "bayesian", "hyperband")


@dataclass(frozen=True)
class TuneSpaceConfig:
    """The hyper-parameter search space. A range is [low, high]; choices are a list; an empty
    list leaves that value as the config sets it (not searched)."""
    learning_rate: tuple[float, ...] = (1e-3, 1e-2)     # log-uniform in [low, high]
    warmup_steps: tuple[int, ...] = (5, 20)             # choices
    dropout: tuple[float, ...] = ()                     # uniform in [low, high]
    d_model: tuple[int, ...] = ()                       # width choices (divisible by n_head)
    n_layer: tuple[int, ...] = ()                       # depth choices
    accumulation_steps: tuple[int, ...] = ()            # choices (global batch stays fixed)


@dataclass(frozen=True)
class TuneConfig:
    """The Tuner stage: runs before the Trainer when trials > 0; its best values override the
    config the Trainer trains with."""
    trials: int = 0
    algorithm: str = "random"                           # random | bayesian | hyperband
    # Optimizer steps per trial (hyperband: the largest budget; its rounds use 1/3, 1/9 of it).
    steps_per_trial: int = 40
    eval_batches: int = 5
    seed: int = 0
    space: TuneSpaceConfig = field(default_factory=TuneSpaceConfig)
