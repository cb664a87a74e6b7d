"""Hyper-parameter search whose trials run bigtrain's own training loop (never Keras fit).

Each trial: the trial's values applied over the typed config (config/hyperparameters.py), a
step budget, `components.training.loop.train` (the Trainer's entry point: same strategy, step,
schedule, precision), then `loop.evaluate` on the eval split; the objective (space.OBJECTIVE_NAME)
goes back to the KerasTuner oracle (random search, Bayesian optimization or Hyperband). Every
trial is also written for TensorBoard's HParams view (one run folder per trial).
"""

from __future__ import annotations

from components.storage import checkpoints, fs
import json
import logging
import math
import os
import time

import keras_tuner as kt

from components.config import hyperparameters
from components.tuner import space as space_lib
from components import config as config_lib

LOGGER = logging.getLogger("bigtrain.tune")
# Hyperband: the largest budget (tune.steps_per_trial) is this many "epochs"; rounds train
# steps_per_trial x epochs / HYPERBAND_MAX_EPOCHS steps (1/9, 1/3, 1 of the budget).
HYPERBAND_MAX_EPOCHS = 9
HYPERBAND_FACTOR = 3


def make_oracle(tune: config_lib.TuneConfig, hyperparameters):
    objective = kt.Objective(space_lib.OBJECTIVE_NAME, direction=space_lib.OBJECTIVE_DIRECTION)
    # KerasTuner reads seed 0 as "no seed" (a random one): shift by one so every seed is fixed.
    common = dict(objective=objective, hyperparameters=hyperparameters, seed=tune.seed + 1,
                  tune_new_entries=False, allow_new_entries=False,
                  # Every failed trial is recorded (MLMD, report); the search stops only when
                  # this many fail in a row, then the stage fails with their errors.
                  max_consecutive_failed_trials=tune.trials)
    if tune.algorithm == "random":
        return kt.oracles.RandomSearchOracle(max_trials=tune.trials, **common)
    if tune.algorithm == "bayesian":
        return kt.oracles.BayesianOptimizationOracle(
            max_trials=tune.trials, num_initial_points=min(2, tune.trials), **common)
    oracle = kt.oracles.HyperbandOracle(max_epochs=HYPERBAND_MAX_EPOCHS, factor=HYPERBAND_FACTOR,
                                        hyperband_iterations=1, **common)
    oracle.max_trials = tune.trials  # Hyperband's brackets may want more: tune.trials caps them
    return oracle


class TrainLoopTuner(kt.engine.base_tuner.BaseTuner):
    """A KerasTuner tuner whose run_trial is bigtrain's training loop on the typed config."""

    def __init__(self, oracle, *, base_config: config_lib.Config, steps_per_trial: int,
                 eval_batches: int, train_files, eval_files, work_dir: str, log_dir: str):
        super().__init__(oracle=oracle, hypermodel=None, directory=work_dir,
                         project_name="search", overwrite=True)
        self.base_config, self.steps_per_trial, self.eval_batches = base_config, steps_per_trial, eval_batches
        self.train_files, self.eval_files = list(train_files), list(eval_files)
        self.work_dir, self.log_dir = work_dir, log_dir
        self.trial_figures: dict[str, dict] = {}

    def trial_steps(self, values: dict) -> int:
        if "tuner/epochs" in values:  # a Hyperband round
            return max(2, round(self.steps_per_trial * values["tuner/epochs"] / HYPERBAND_MAX_EPOCHS))
        return self.steps_per_trial

    def tokenizer(self, config: config_lib.Config):
        """The Tokenizer the examples were encoded with (their artifact is <uri>/Split-train/*)."""
        from components.tokenizer.artifact import examples_tokenizer
        examples_uri = os.path.dirname(os.path.dirname(self.train_files[0]))
        return examples_tokenizer(examples_uri, config.data, "Tuner")

    def checkpoint_dir(self, trial_id: str) -> str:
        return checkpoints.root(os.path.join(self.work_dir, "trials", trial_id))

    def run_trial(self, trial, *args, **kwargs):
        from components.training import loop

        values = trial.hyperparameters.values
        steps = self.trial_steps(values)
        config = space_lib.with_step_budget(
            hyperparameters.apply_hyperparameters(self.base_config, values), steps)
        checkpoint_dir = self.checkpoint_dir(trial.trial_id)
        parent = values.get("tuner/trial_id")
        if parent and fs.isdir(self.checkpoint_dir(parent)):
            # Hyperband promotes a trial: continue from its checkpoint instead of starting over.
            fs.copytree(self.checkpoint_dir(parent), checkpoint_dir)
        LOGGER.info("trial %s: %d steps, %s", trial.trial_id, steps,
                    json.dumps(hyperparameters.config_values(values), sort_keys=True))
        started = time.perf_counter()
        run_dir = os.path.join(self.log_dir, f"trial_{trial.trial_id}")
        result = loop.train(config, self.train_files, run_dir, checkpoint_dir)
        t = config.train
        metrics = loop.evaluate(result.model, self.eval_files, config.data.seq_len,
                                t.global_batch_size, self.eval_batches,
                                tokenizer=self.tokenizer(config))
        objective = space_lib.objective_value(metrics)
        self.trial_figures[trial.trial_id] = {
            "steps": result.steps, "seconds": round(time.perf_counter() - started, 1),
            "final_loss": result.final_loss, "parameter_count": result.parameter_count}
        write_hparams(run_dir, trial.trial_id, hyperparameters.config_values(values), objective, steps)
        LOGGER.info("trial %s: %s %.4f", trial.trial_id, space_lib.OBJECTIVE_NAME, objective)
        if not math.isfinite(objective):
            raise kt.errors.FailedTrialError(
                f"trial {trial.trial_id}: non-finite {space_lib.OBJECTIVE_NAME} ({objective})")
        return {space_lib.OBJECTIVE_NAME: objective}

    def trial_records(self) -> list[dict]:
        """Every trial, in creation order: id, status, config values, objective, figures."""
        records = []
        for trial_id, trial in sorted(self.oracle.trials.items()):
            score = trial.score
            record = {"trial_id": trial_id, "status": str(trial.status),
                      "values": hyperparameters.config_values(trial.hyperparameters.values),
                      space_lib.OBJECTIVE_NAME: None if score is None else float(score)}
            record.update(self.trial_figures.get(trial_id, {}))
            if trial.message:
                record["error"] = trial.message.strip().splitlines()[-1]
            records.append(record)
        return records


def write_hparams_config(log_dir: str, hyperparameters) -> None:
    """The experiment for TensorBoard's HParams view: one HParam per searched key, the objective."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hparams_api
    params = []
    for hp in hyperparameters.space:
        if isinstance(hp, kt.engine.hyperparameters.Choice):
            domain = hparams_api.Discrete(list(hp.values))
        elif isinstance(hp, kt.engine.hyperparameters.Float):
            domain = hparams_api.RealInterval(float(hp.min_value), float(hp.max_value))
        else:
            domain = None
        params.append(hparams_api.HParam(hp.name, domain))
    with tf.summary.create_file_writer(log_dir).as_default():
        hparams_api.hparams_config(hparams=params, metrics=[hparams_api.Metric(
            space_lib.OBJECTIVE_NAME, display_name=space_lib.OBJECTIVE_NAME)])


def write_hparams(run_dir: str, trial_id: str, values: dict, objective: float, step: int) -> None:
    """One HParams session per trial: its values and its objective."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hparams_api
    writer = tf.summary.create_file_writer(run_dir)
    with writer.as_default():
        hparams_api.hparams(values, trial_id=trial_id)
        tf.summary.scalar(space_lib.OBJECTIVE_NAME, objective, step=step)
    writer.flush()


def tuner_fn(fn_args):
    """What TFX's Tuner executor calls: custom_config carries the Tuner's sections
    (components/tuner/component.py TUNER_READS); TFX's fn_args give the example files."""
    from tfx.components.tuner.component import TunerFnResult

    custom = fn_args.custom_config
    from components.config import stages
    from components.tuner.component import TUNER_READS
    config = stages.read_custom(TUNER_READS, custom)
    tune = config.tune
    from components.training.strategy import cpu_devices_needed, ensure_cpu_replicas
    if cpu_devices_needed(config.runtime):  # mirrored replicas or pipeline stages
        ensure_cpu_replicas(cpu_devices_needed(config.runtime))
    hyperparameters = space_lib.declare(tune.space)
    log_dir = custom["log_dir"]
    write_hparams_config(log_dir, hyperparameters)
    tuner = TrainLoopTuner(make_oracle(tune, hyperparameters), base_config=config,
                           steps_per_trial=tune.steps_per_trial, eval_batches=tune.eval_batches,
                           train_files=fn_args.train_files, eval_files=fn_args.eval_files,
                           work_dir=os.path.join(fn_args.working_dir, "tuner"), log_dir=log_dir)
    return TunerFnResult(tuner=tuner, fit_kwargs={})
