"""The search space (tune.space) as KerasTuner hyper-parameters (values are applied over the
typed config by components/config/hyperparameters.py). keras_tuner is imported only to declare.

Hyper-parameter names are the dotted config keys they override (`train.learning_rate`), so the
best-hyper-parameters artifact, MLMD, the report and TensorBoard all name the config key itself.
"""

from __future__ import annotations

from dataclasses import replace

from components import config as config_lib

# What a trial minimizes, named in one place: the Tuner's oracle, MLMD, the report and the
# TensorBoard HParams view all read it from here. Every trial of one Tuner shares the examples
# (one tokenizer) and the same eval sequences, so bits per byte = eval_loss x tokens / bytes /
# ln 2 is eval_loss times one constant: both rank trials identically; the name stays eval_loss.
OBJECTIVE_NAME = "eval_loss"
OBJECTIVE_DIRECTION = "min"

def objective_value(eval_metrics: dict) -> float:
    """The objective from the in-memory evaluation of a trial (loop.evaluate's dict)."""
    return float(eval_metrics["loss"])


def declare(space: config_lib.TuneSpaceConfig):
    """keras_tuner.HyperParameters for the space: log-uniform learning rate, uniform dropout,
    choices for the rest. Empty entries are not searched."""
    import keras_tuner as kt
    hp = kt.HyperParameters()
    if space.learning_rate:
        low, high = space.learning_rate
        hp.Float("train.learning_rate", low, high, sampling="log") if low < high else \
            hp.Fixed("train.learning_rate", low)
    if space.dropout:
        low, high = space.dropout
        hp.Float("model.dropout", low, high) if low < high else hp.Fixed("model.dropout", low)
    for key, choices in (("train.warmup_steps", space.warmup_steps), ("model.d_model", space.d_model),
                         ("model.n_layer", space.n_layer),
                         ("train.accumulation_steps", space.accumulation_steps)):
        if choices:
            hp.Choice(key, sorted(set(choices)), ordered=True)
    if not hp.space:
        raise config_lib.ConfigError("tune.space: every entry is empty; nothing to search")
    return hp


def with_step_budget(config: config_lib.Config, steps: int) -> config_lib.Config:
    """A trial's config: `steps` optimizer steps; no checkpoint except the last one."""
    t = config.train
    warmup = min(t.warmup_steps, steps - 1)
    return replace(config, train=replace(t, train_steps=steps, warmup_steps=warmup,
                                         checkpoint_every=steps, log_every=max(steps // 4, 1)))
