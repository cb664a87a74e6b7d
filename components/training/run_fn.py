"""What TFX's Trainer calls: run_fn (thin: unpack fn_args, call the plain functions) and the
Trainer executor that records the training figures on the Model artifact in MLMD."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time

from tfx.components.trainer.executor import GenericExecutor
from tfx.types import artifact_utils

from components.model import properties as model_props
from components.storage import checkpoints, fs
from components.common import figures
from components.storage.digest import closure_digest
from components.config import hyperparameters as hyperparameters_lib
from components.config import stages
from components.config import tracking as tracking_lib
from components.tokenizer import artifact as tokenizer_artifact
from components import config as config_lib

SUMMARY_FILE = "training_summary.json"
# custom_config keys: the tracking section (resolved; only when it is not the default) and the
# tracker run's identity, which the executor adds (the bigtrain run id: not in the cache key).
TRACKING, TRACKING_RUN = "tracking", "tracking_run"
DATA_FACTS = "data_facts"   # custom_config key the executor adds (not part of TFX's cache key)
DIVERGED = ("training diverged ({steps} steps, {skipped} skipped as non-finite): lower "
            "train.learning_rate, keep train.clip_norm on, or look for a bad batch; nothing was "
            "exported")


# The code that decides the trained model: the import closure of this module (an edit to any
# module it runs re-runs the Trainer: its cache key), less components.config (settings reach the
# Trainer as its sections, which TFX keys on already; the config package changes with every new
# setting of any stage) and, but for a train.init_from=hf:DIR warm start, the Hugging Face layout
# (the card, tokenizer files, the directory writer) its reader lives in.
TRAINER_ENTRY, CONFIG_CODE, HF_CODE = "components.training.run_fn", "components.config", "components.serving.hf"


def training_code(config: config_lib.Config) -> tuple[str, ...]:
    """The packages left out of the Trainer's code closure for this config."""
    from components.training.hf_source import hf_source
    return (CONFIG_CODE,) if hf_source(config.train.init_from) else (CONFIG_CODE, HF_CODE)


def training_code_digest(config: config_lib.Config, root: str | None = None) -> str:
    """closure_digest of TRAINER_ENTRY (root: a copy of the source tree)."""
    return closure_digest(TRAINER_ENTRY, leave_out=training_code(config), root=root)


# What the Trainer reads (its one declaration: components/config/stages.py): the sections that
# decide the model (data's seq_len and tokenizer: the examples carry the rest; runtime without
# the Beam arguments), and the parts of eval (it measures its model on the Evaluator's sample)
# and export (the variants it writes) that decide what it does after training: a change there
# re-runs the Trainer, which resumes from its last checkpoint (keyed on `model` only, without
# where it trains) instead of training again. export.serve and the eval gates are the Evaluator's.
TRAINER_READS = stages.StageReads(
    stage="Trainer", declared_in="components/training/run_fn.py TRAINER_READS",
    sections={"data": stages.only("seq_len", "tokenizer", "vocab_size"), "model": stages.ALL,
              "train": stages.ALL,
              "runtime": stages.without("beam_args", "beam_direct_stages"),
              "eval": stages.only("batch_size", "max_batches"),
              "export": stages.only("quantize", "max_new_tokens")},
    model=("data", "model", "train", "runtime"), placement=("runtime.cluster", "runtime.ray"),
    extras={"checkpoint_root": "where checkpoints go (the keyed folder is checkpoint_dir_for's)",
            "code_digest": "the digest of the Trainer's import closure (training_code_digest)",
            TRACKING: "the tracking section resolved against the home, when not the default",
            DATA_FACTS: "the examples' facts, added by TrainerExecutor (after the cache key)",
            TRACKING_RUN: "the tracker run's identity, added by TrainerExecutor (idem)"})


def trainer_custom_config(config: config_lib.Config, checkpoint_root: str) -> dict:
    """The Trainer's custom_config, TFX's cache key for it: one key per section
    (stages.handoff of TRAINER_READS), the checkpoint root and the code digest; and
    `tracking` (its settings resolved against the home) only when they are not the default, so
    that a default run keeps its cache key; without copy_artifacts, which only the run's last
    phase uses (runners/local/tracking.py): changing it does not train again."""
    extras = dict(checkpoint_root=checkpoint_root, code_digest=training_code_digest(config))
    tracking = config_lib.section_without(config.tracking, "copy_artifacts")
    if tracking != config_lib.TrackingConfig():  # the default keeps its cache key
        extras[TRACKING] = json.dumps(tracking_lib.resolved(tracking, config.paths.home),
                                      sort_keys=True)
    return stages.custom_config(TRAINER_READS, config, **extras)


def trainer_properties(config: config_lib.Config, checkpoint_root: str) -> dict:
    """The Trainer node's execution properties from the config, all of them here: its
    custom_config (trainer_custom_config) and TFX's train_args / eval_args (train.train_steps,
    train.eval_batches: TFX wants them; run_fn reads its own config), so the DAG that wires the
    node forwards the whole Config without opening a section of it."""
    from tfx.proto import trainer_pb2
    return dict(train_args=trainer_pb2.TrainArgs(num_steps=config.train.train_steps),
                eval_args=trainer_pb2.EvalArgs(num_steps=config.train.eval_batches),
                custom_config=trainer_custom_config(config, checkpoint_root))


def trainer_config(custom_config: dict, hyperparameters: dict | None
                   ) -> tuple[config_lib.Config, dict]:
    """The typed config run_fn works with, rebuilt from the Trainer's sections (stages.read_back),
    with the Tuner's best values (its HyperParameters artifact) applied. Returns (config, tuned)."""
    config = stages.read_custom(TRAINER_READS, custom_config)
    tuned = hyperparameters_lib.config_values((hyperparameters or {}).get("values", {}))
    if tuned:
        config = hyperparameters_lib.apply_hyperparameters(config, tuned)
    return config, tuned


def checkpoint_dir_for(view: dict, checkpoint_root: str, base_model, train_files) -> str:
    """This training's checkpoint folder: keyed by its training view (after tuning), the parent
    model and the examples (components/storage/checkpoints.py keyed_dir)."""
    return checkpoints.keyed_dir(checkpoint_root, json.dumps(view, sort_keys=True), base_model,
                                 train_files)


class PhaseTimes:
    """Wall (and CPU) seconds of the Trainer stage's phases, in the order they ran: run_fn logs the
    wall seconds in one line at the end (phases_line): every run's log says where its time went."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}   # this process's CPU time (benchmarks read it)

    @contextlib.contextmanager
    def phase(self, name: str):
        started, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
        self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + time.process_time() - cpu


LOOP_PHASE = "training loop"


def phases_line(seconds: dict) -> str:
    """'training loop 180.2 s; outside it 19.6 s: final eval 4.1 s, compressors 0.3 s, ...'."""
    outside = {name: s for name, s in seconds.items() if name != LOOP_PHASE}
    parts = ", ".join(f"{name} {s:.1f} s" for name, s in outside.items())
    return (f"{LOOP_PHASE} {seconds.get(LOOP_PHASE, 0.0):.1f} s; outside it "
            f"{sum(outside.values()):.1f} s: {parts}")


def evaluate_trained(model, config: config_lib.Config, fn_args, tokenizer,
                     times: PhaseTimes | None = None) -> tuple[dict, float]:
    """(metrics of the in-memory model on the eval split, the unigram baseline loss); each of the
    three timed as a phase of `times`."""
    from components.metrics import lm as metrics_lib
    from components.training import loop
    times = times or PhaseTimes()
    seq_len = config.data.seq_len
    # eval.batch_size micro-batches (the global batch in one piece does not fit at scale), on
    # the Evaluator's sample (eval.max_batches x eval.batch_size sequences: metrics.eval_sample),
    # so the Trainer's and the Evaluator's eval loss are measured on the same sequences.
    with times.phase("final eval"):
        metrics = loop.evaluate(model, fn_args.eval_files, seq_len, config.eval.batch_size,
                                config.eval.max_batches, tokenizer=tokenizer)
    with times.phase("compressors"):
        metrics.update(compressor_figures(fn_args.eval_files, seq_len, config, tokenizer))
    with times.phase("unigram baseline"):
        baseline = loop.unigram_baseline(fn_args.train_files, fn_args.eval_files, seq_len,
                                         metrics_lib.sample_size(config.eval),
                                         vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
    logging.getLogger("bigtrain.train").info(
        "eval loss %.4f nats/token, %.4f bits/byte (perplexity %.2f, accuracy %.3f) vs unigram "
        "baseline %.4f nats/token", metrics["loss"], metrics["bits_per_byte"],
        metrics["perplexity"], metrics["accuracy"], baseline)
    return metrics, baseline


def compressor_figures(eval_files, seq_len: int, config, tokenizer) -> dict:
    """zlib-9 / lzma-9 bits per byte of the eval sample's text (the raw bytes under its targets)."""
    from components.metrics import lm as metrics_lib
    sample = metrics_lib.eval_sample(eval_files, seq_len, metrics_lib.sample_size(config.eval))
    if tokenizer.kind == "bytes":
        text = metrics_lib.sample_text_bytes(sample)
    else:
        specials = {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id}
        text = b"".join(tokenizer.decode([int(i) for i in row[1:] if int(i) not in specials])
                        for row in sample)
    return metrics_lib.compressor_bits_per_byte(text)


def training_summary(config: config_lib.Config, result, metrics: dict, baseline: float) -> dict:
    """The training figures the Trainer executor records on the Model artifact."""
    return {  # the names: components/model/properties.py
        model_props.STEPS: result.steps, model_props.RESUMED_FROM_STEP: result.resumed_from_step,
        model_props.SKIPPED_STEPS: result.skipped_steps, model_props.TOKENS_SEEN: result.tokens_seen,
        model_props.SPIKE_ROLLBACKS: result.rollbacks, model_props.SKIPPED_BATCHES: result.skipped_batches,
        model_props.TOKENS_PER_SECOND: round(result.tokens_per_second, 1),
        model_props.FINAL_LOSS: result.final_loss, model_props.EVAL_LOSS: metrics["loss"],
        model_props.EVAL_ACCURACY: metrics["accuracy"], model_props.UNIGRAM_BASELINE_LOSS: baseline,
        model_props.EVAL_BITS_PER_BYTE: metrics["bits_per_byte"],
        model_props.EVAL_SAMPLE_SEQUENCES: metrics["sample_sequences"],
        model_props.EVAL_LOSS_STANDARD_ERROR: metrics["loss_standard_error"],
        model_props.ZLIB9_BITS_PER_BYTE: metrics["zlib9_bits_per_byte"],
        model_props.LZMA9_BITS_PER_BYTE: metrics["lzma9_bits_per_byte"],
        model_props.PARAMETER_COUNT: result.parameter_count, model_props.FLOPS_PER_TOKEN: result.flops_per_token,
        model_props.NUM_REPLICAS: result.num_replicas, model_props.PRECISION: config.runtime.precision,
        model_props.CONFIG_DIGEST: stages.digest_of(TRAINER_READS, config),
    }


def train_model(config: config_lib.Config, fn_args, checkpoint_dir: str, tokenizer, **hooks):
    """loop.train's TrainResult in this process (hooks: its prepare_model, trackers, on_step);
    with runtime.cluster=ray the same loop on runtime.ray.workers Ray workers (ray_job.py: no warm
    start or trackers there, components/config/cluster.py refuses them); with
    runtime.strategy=parameter_server this process is the chief of TF_CONFIG's cluster and trains
    through its ps and worker tasks (parameter_server.train_coordinated): no validation while
    training, no TensorBoard curves, no trackers' training figures, no first-step loss in that
    mode (none are recorded)."""
    from components.config.strategy_rules import PARAMETER_SERVER
    if config.runtime.strategy == PARAMETER_SERVER:
        from components.training import parameter_server
        return parameter_server.trainer_result(parameter_server.train_coordinated(
            config, fn_args.train_files, checkpoint_dir), config)
    if config.runtime.cluster == "ray":
        from components.training.ray_job import train_on_ray
        return train_on_ray(config, fn_args.train_files, fn_args.eval_files,
                            fn_args.model_run_dir, checkpoint_dir, on_step=hooks.get("on_step"))
    from components.training import loop
    from components.training.validation import Validation
    return loop.train(config, fn_args.train_files, fn_args.model_run_dir, checkpoint_dir,
                      validation=Validation.from_config(config, fn_args.eval_files, tokenizer),
                      **hooks)


def run_fn(fn_args) -> None:
    from components.training import warm_start
    from components.serving.variants import export_variants
    from components.training.strategy import cpu_devices_needed, ensure_cpu_replicas
    from components.config.strategy_rules import PARAMETER_SERVER, chief_of_cluster

    custom = fn_args.custom_config
    config, tuned = trainer_config(custom, fn_args.hyperparameters)
    if config.runtime.strategy == PARAMETER_SERVER:   # the plan refused the Tuner (no tune here)
        chief_of_cluster(os.environ)
    if cpu_devices_needed(config.runtime):
        ensure_cpu_replicas(cpu_devices_needed(config.runtime))
    warm = {}
    tokenizer = examples_tokenizer(fn_args.train_files, config)
    hf_dir = warm_start.hf_directory(config.train.init_from, fn_args.base_model)
    if hf_dir is not None:  # every named error of an HF source, before any model is built
        warm.update(warm_start.check_hf_source(config, hf_dir, tokenizer))
    prepare = warm_start.preparer(warm_start.resolve_source(config.train.init_from, fn_args.base_model),
                                  config.train.freeze, warm)
    # After tuning: the checkpoint key and MODEL_INFO's config.
    view = stages.model_view(TRAINER_READS, config)
    checkpoint_dir = checkpoint_dir_for(view, custom["checkpoint_root"], fn_args.base_model,
                                        fn_args.train_files)
    first_loss, times = {}, PhaseTimes()
    with training_trackers(custom) as trackers, times.phase(LOOP_PHASE):
        result = train_model(config, fn_args, checkpoint_dir, tokenizer, prepare_model=prepare,
                             trackers=trackers,
                             on_step=lambda step, loss: first_loss.setdefault("loss", loss))
    figures.require_finite("Trainer", "final training loss", result.final_loss, DIVERGED.format(
        steps=result.steps, skipped=result.skipped_steps))
    metrics, baseline = evaluate_trained(result.model, config, fn_args, tokenizer, times)
    summary = training_summary(config, result, metrics, baseline)
    summary.update(result.validation)
    summary.update({model_props.CODE_DIGEST: custom["code_digest"], model_props.CHECKPOINT_DIR: checkpoint_dir})
    # Tuning and warm start, when used (the run report and `bigtrain lineage` read these).
    if tuned:
        summary[model_props.TUNED_HYPERPARAMETERS] = json.dumps(tuned, sort_keys=True)
    if "loss" in first_loss:
        summary[model_props.FIRST_STEP_LOSS] = first_loss["loss"]
    if config.train.init_from != "none":
        summary.update({model_props.INIT_FROM: config.train.init_from, **warm})
    with times.phase("export"):
        manifest = export_variants(result.model, config.model, config.data.seq_len,
                                   os.path.dirname(fn_args.serving_model_dir.rstrip("/")),
                                   tokenizer=tokenizer, quantize=config.export.quantize,
                                   max_new_tokens_limit=config.export.max_new_tokens,
                                   metadata={"config": view, "training": summary,
                                             "data": json.loads(custom.get(DATA_FACTS) or "{}")})
    summary[model_props.VARIANTS] = ",".join(manifest)
    with times.phase("summary"):
        fs.write_text(os.path.join(fn_args.model_run_dir, SUMMARY_FILE),
                      json.dumps(summary, indent=2, sort_keys=True))
    # Where the stage's time went (docs/training.md, "Where the Trainer's time goes").
    logging.getLogger("bigtrain.train").info("Trainer stage: %s", phases_line(times.seconds))


@contextlib.contextmanager
def training_trackers(custom: dict):
    """The trackers of the tracking section (components/tracking) for the training loop's figures,
    on the tracker run of this bigtrain run (TRACKING_RUN, the executor's); None: TensorBoard only."""
    from components.tracking.fanout import Trackers
    from components.tracking.wandb_tracker import PHASES
    settings = json.loads(custom.get(TRACKING) or "null")
    identity = dict(json.loads(custom.get(TRACKING_RUN) or "{}"), phase=PHASES[1])
    if not settings or "run_id" not in identity:
        yield None
        return
    trackers = Trackers.from_settings(settings, identity)
    trackers.start(None, {})
    try:
        yield trackers
    finally:
        trackers.finish(None)


def examples_tokenizer(train_files, config):
    """The Tokenizer the examples were encoded with (copied into the Examples artifact by
    TextExampleGen; the byte tokenizer for byte-level examples), checked against the config."""
    pattern = train_files[0] if train_files else ""
    examples_uri = os.path.dirname(os.path.dirname(pattern))   # <uri>/Split-train/*
    return tokenizer_artifact.examples_tokenizer(examples_uri, config.data, "Trainer")


def examples_facts(examples: list) -> dict:
    """The card's data facts of the Examples artifact the Trainer reads (TextExampleGen's MLMD
    properties, components/serving/data_facts.py); {} without one."""
    from components.serving.data_facts import data_facts
    if not examples:
        return {}
    artifact = examples[0]
    return data_facts({name: artifact.get_custom_property(name)
                       for name in artifact.mlmd_artifact.custom_properties})


class TrainerExecutor(GenericExecutor):
    """TFX's GenericExecutor (calls run_fn), then the training figures become MLMD custom
    properties of the Model artifact, where the run report and `bigtrain lineage` read them."""

    def Do(self, input_dict, output_dict, exec_properties):
        # What the model is trained on (its Examples' sources and counts) goes into its MODEL_INFO,
        # for every model card (components/serving/hf/card.py), with or without a store at hand.
        custom = json.loads(exec_properties.get("custom_config") or "{}")
        custom[DATA_FACTS] = json.dumps(examples_facts(input_dict.get("examples") or []), sort_keys=True)
        if self._context is not None and self._context.pipeline_run_id:   # the tracker run's key
            custom[TRACKING_RUN] = json.dumps({"run_id": self._context.pipeline_run_id,
                                               "pipeline_name": getattr(self._context.pipeline_info, "id", "")})
        super().Do(input_dict, output_dict, dict(exec_properties, custom_config=json.dumps(custom)))
        model = artifact_utils.get_single_instance(output_dict["model"])
        model_run = artifact_utils.get_single_instance(output_dict["model_run"])
        summary = json.loads(fs.read_text(os.path.join(model_run.uri, SUMMARY_FILE)))
        parents = input_dict.get("base_model") or []
        if parents:  # the warm-start parent, an input of this execution (lineage: fine-tuned from)
            model.set_int_custom_property(model_props.FINE_TUNED_FROM_MODEL_ID, parents[0].id)
        for name, value in summary.items():
            figures.set_figure(model, name, value, "Trainer", hint="training diverged")
