"""TFX's Tuner component with an executor that runs bigtrain's search (search.tuner_fn) and
records every trial in MLMD: the best values and objective on the HyperParameters artifact, each
trial's values, status and objective on the TunerResults artifact."""

from __future__ import annotations

from components.storage import fs
import json
import os

from tfx.components.trainer import fn_args_utils
from tfx.components.tuner import executor as tuner_executor
from tfx.components.tuner.component import Tuner
from tfx.dsl.components.base import executor_spec
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils

from components import config as config_lib
from components.storage.digest import closure_digest
from components.config import stages
from components.common.figures import set_figure
from components.training.run_fn import CONFIG_CODE, HF_CODE, TRAINER_READS
from components.tuner import properties as names
from components.tuner import space as space_lib

TRIALS_FILE = "trials.json"
TENSORBOARD_DIR = "tensorboard"


class TunerExecutor(tuner_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties):
        fn_args = fn_args_utils.get_common_fn_args(input_dict, exec_properties, self._get_tmp_dir())
        results = artifact_utils.get_single_instance(output_dict["tuner_results"])
        best = artifact_utils.get_single_instance(output_dict["best_hyperparameters"])
        fn_args.custom_config = dict(fn_args.custom_config or {},
                                     log_dir=os.path.join(results.uri, TENSORBOARD_DIR))
        tuner = tuner_executor._get_tuner_fn(exec_properties)(fn_args).tuner
        tuner.search(verbose=0)  # progress goes to the bigtrain.tune log, not KerasTuner's display
        records = tuner.trial_records()
        fs.write_text(os.path.join(results.uri, TRIALS_FILE), json.dumps(records, indent=2))
        completed = [r for r in records if r[space_lib.OBJECTIVE_NAME] is not None]
        if not completed:
            raise RuntimeError("tuning: no trial completed; " + "; ".join(
                f"trial {r['trial_id']}: {r.get('error', r['status'])}" for r in records))
        # TFX's own writer: best_hyperparameters.txt is what the Trainer's executor reads.
        tuner_executor.write_best_hyperparameters(tuner, output_dict)
        record_trials(best, results, records, json.loads(fn_args.custom_config["tune"]))


def _set(artifact, name: str, value, exact: bool = False) -> None:
    """exact: a float kept as its repr (MLMD's sqlite store rounds doubles to 6 decimals, which
    would turn a learning rate of 1.5e-6 into 2e-06)."""
    set_figure(artifact, name, value, "Tuner", exact=exact)


def record_trials(best, results, records: list[dict], tune: dict) -> None:
    objective = space_lib.OBJECTIVE_NAME
    completed = [r for r in records if r[objective] is not None]
    winner = min(completed, key=lambda r: r[objective])
    for artifact in (best, results):
        _set(artifact, names.OBJECTIVE, objective)
        _set(artifact, names.ALGORITHM, tune["algorithm"])
        _set(artifact, names.TRIALS, len(records))
        _set(artifact, names.TRIALS_COMPLETED, len(completed))
        _set(artifact, names.BEST_TRIAL, winner["trial_id"])
        _set(artifact, names.best(objective), winner[objective])
    for key, value in winner["values"].items():
        _set(best, key, value, exact=True)
    results.set_string_custom_property(names.TRIALS_JSON, json.dumps(records, sort_keys=True))
    for record in records:
        trial = record["trial_id"]
        _set(results, names.trial_property(trial, "status"), record["status"])
        _set(results, names.trial_property(trial, objective), record[objective])
        for key, value in record["values"].items():
            _set(results, names.trial_property(trial, key), value, exact=True)


# The search and training code (a change re-runs the Tuner, like the Trainer); trials never start
# from a Hugging Face directory, so its layout is left out.
TUNER_CODE = ("components.tuner.component", "components.tuner.search")   # the entries


def tuner_code_digest(root: str | None = None) -> str:
    """closure_digest of the Tuner's entries, less the config package and the HF layout."""
    return closure_digest(*TUNER_CODE, leave_out=(CONFIG_CODE, HF_CODE), root=root)
# What the Tuner reads (its one declaration, components/config/stages.py): what a trial trains
# (the Trainer's model sections, less the warm-start keys: trials start from random weights) and
# the tune section (space, algorithm, budget), and eval.batch_size (a trial's memory check counts
# an evaluation micro-batch, components/training/memory.py).
TUNER_READS = stages.StageReads(
    stage="Tuner", declared_in="components/tuner/component.py TUNER_READS",
    sections={**{name: TRAINER_READS.sections[name] for name in TRAINER_READS.model},
              "train": stages.without("init_from", "freeze"), "tune": stages.ALL,
              "eval": stages.only("batch_size")},
    extras={"code_digest": "the digest of the Tuner's import closure (tuner_code_digest)",
            "log_dir": "its TensorBoard folder, added by TunerExecutor (after the cache key)"})


class BigtrainTuner(Tuner):
    """TFX's Tuner (same spec: examples in; best_hyperparameters and tuner_results out)."""
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(TunerExecutor)


def make_tuner(config: config_lib.Config, examples, schema):
    """The Tuner node for a config. Its cache key: the training sections of the config (what a
    trial trains), the tune section (space, algorithm, budget), the code and the examples."""
    return BigtrainTuner(
        tuner_fn="components.tuner.search.tuner_fn", examples=examples, schema=schema,
        train_args=trainer_pb2.TrainArgs(num_steps=config.tune.steps_per_trial),
        eval_args=trainer_pb2.EvalArgs(num_steps=config.tune.eval_batches),
        custom_config=stages.custom_config(TUNER_READS, config, code_digest=tuner_code_digest())
    ).with_id("Tuner")
