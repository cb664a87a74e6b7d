"""create_pipeline(config): wiring only. Runners add environment (paths, metadata, Beam args)."""

from __future__ import annotations

import logging
import os

# Component modules, not `tfx.v1`: the v1 facade also imports the Google Cloud extensions
# (about 7 s per process, paid by every cached re-run).
from tfx.components import (ExampleValidator, ImportExampleGen, Pusher, StatisticsGen, Trainer)
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import \
    LatestBlessedModelStrategy
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2, pusher_pb2
from tfx.types import Channel, standard_artifacts

from components.model import properties as model_props
from components.validation.schema_gen import CuratedSchemaGen
from components.evaluation.component import LanguageModelEvaluator
from components.evaluation.held_out_sets import sets_cache_key
from components.push.executor import PUSHER_READS, AtomicPusherExecutor
from components.training.run_fn import TrainerExecutor, trainer_properties
from components.text_example_gen.component import TextExampleGen
from components.tuner.component import make_tuner
from components.tokenizer.component import TokenizerGen
from components.validation.gate import AnomaliesGate
from components.config import beam_placement
from components.storage import checkpoints, fs
from components.config import stages
from components.config import Config


class BigtrainTrainer(Trainer):
    """TFX's Trainer whose executor also records the training figures in MLMD."""
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(TrainerExecutor)


class AtomicPusher(Pusher):
    """TFX's Pusher (same spec, blessing check and PushedModel) with an atomic, idempotent copy."""
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(AtomicPusherExecutor)


def warm_start_parent(config: Config):
    """The node whose Model the Trainer fine-tunes (train.init_from): the latest blessed model (a
    second resolver) or an imported path, and its Model channel; (None, None) for random initial
    weights."""
    init_from = config.train.init_from
    if init_from == "none":
        return None, None
    if init_from == "latest_blessed":
        node = Resolver(strategy_class=LatestBlessedModelStrategy,
                        model=Channel(type=standard_artifacts.Model),
                        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
                        ).with_id("base_model_resolver")
        return node, node.outputs["model"]
    from tfx.dsl.components.common.importer import Importer
    from components.training.hf_source import check_init_from, hf_source
    source = hf_source(init_from) or init_from
    uri = source if fs.is_remote(source) else os.path.abspath(source)  # gs://, s3:// as given
    # An HF directory is imported with its content digest: new weights at the same path are a
    # new artifact (the Trainer then re-runs), and lineage records which weights were read.
    extra = {}
    if hf_source(init_from) is not None:
        check_init_from(config)    # every runner refuses a bad hf:DIR before any stage
        from components.serving.hf.directory import directory_digest
        extra = {"custom_properties": {model_props.HF_DIGEST: directory_digest(uri)}}
    node = Importer(source_uri=uri, artifact_type=standard_artifacts.Model,
                    **extra).with_id("base_model_importer")
    return node, node.outputs["result"]


def create_pipeline(config: Config, *, pipeline_root: str, serving_dir: str,
                    input_fingerprint: str, metadata_connection_config=None,
                    beam_pipeline_args: list[str] | None = None,
                    enable_cache: bool = True, until: str | None = None) -> Pipeline:
    """The whole DAG; with `until`, only the named stage and what it depends on (e.g.
    until="TextExampleGen" prepares data without training). `input_fingerprint`: the run's one
    fingerprint of data.input, computed by the runner (components.storage.listing.fingerprint_input)."""
    tokenizer_gen, example_gen = data_stages(config, input_fingerprint)
    examples = example_gen.outputs["examples"]
    statistics_gen, schema_gen, example_validator, gate = validation_stages(config, examples)
    tuner, base_model, trainer = training_stages(config, examples, schema_gen.outputs["schema"],
                                                 gate, checkpoints.root(pipeline_root))
    latest_blessed, evaluator, pusher = release_stages(config, examples, trainer, serving_dir)
    components = [node for node in (tokenizer_gen, example_gen, statistics_gen, schema_gen,
                                    example_validator, gate, tuner, base_model, trainer,
                                    latest_blessed, evaluator, pusher) if node]
    if until is not None:
        components = stages_until(components, until)
    beam_args = beam_placement.resolved_args(beam_pipeline_args or [])
    place_beam_stages(components, beam_args, config.runtime.beam_direct_stages)
    return Pipeline(
        pipeline_name=config.paths.pipeline_name,
        pipeline_root=pipeline_root,
        components=components,
        enable_cache=enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_args)


def place_beam_stages(components, beam_args: list[str], direct_stages) -> list[str]:
    """Each Beam stage on the run's runner, or on the DirectRunner when runtime.beam_direct_stages
    names it (its own --runner after the run's: components/config/beam_placement.py). Logs where
    each runs, and why, when the run's runner is not the DirectRunner; returns those lines."""
    stages = [node for node in components
              if isinstance(node, base_beam_component.BaseBeamComponent)]
    for node in stages:
        extra = beam_placement.stage_args(node.id, beam_args, direct_stages)
        if extra:
            node.with_beam_pipeline_args(extra)
    lines = beam_placement.placement_lines([n.id for n in stages], beam_args, direct_stages)
    if not beam_placement.is_local(beam_placement.runner_of(beam_args)):
        for line in lines:
            logging.getLogger("bigtrain.data").info("Beam stage %s", line)
    return lines


def beam_stage_lines(pipeline, direct_stages) -> list[str]:
    """Where each Beam stage of a built pipeline runs and why (place_beam_stages' lines), [] when
    the run's runner is local (everything runs in this process): recorded on the run for its
    report (runners/local/run.py, pipeline/lineage/record.py BEAM_PLACEMENT)."""
    beam_args = list(pipeline.beam_pipeline_args or [])
    if beam_placement.is_local(beam_placement.runner_of(beam_args)):
        return []
    return beam_placement.placement_lines(
        [node.id for node in pipeline.components
         if isinstance(node, base_beam_component.BaseBeamComponent)], beam_args, direct_stages)


def data_stages(config: Config, input_fingerprint: str):
    """(TokenizerGen or None, the ExampleGen): both key their cache on the run's one fingerprint."""
    data = config.data
    # data.tokenizer=sentencepiece: a SentencePiece model trained on a sample of the train
    # documents (the Tokenizer artifact) that the data stage tokenizes with and export embeds.
    tokenizer_gen = (TokenizerGen(config, input_fingerprint=input_fingerprint)
                     if data.tokenizer == "sentencepiece" else None)
    if data.format != "tfrecord":
        # Raw text / JSONL / Parquet -> tokenized, packed, gzip TFRecord shards (train / eval).
        return tokenizer_gen, TextExampleGen(
            config, input_fingerprint=input_fingerprint,
            tokenizer=tokenizer_gen.outputs["tokenizer"] if tokenizer_gen else None)
    # Already tokenized shards, imported as they are (and validated like any other).
    return tokenizer_gen, ImportExampleGen(
        input_base=data.input,
        input_config=example_gen_pb2.Input(splits=[
            example_gen_pb2.Input.Split(name="train", pattern="train/*"),
            example_gen_pb2.Input.Split(name="eval", pattern="eval/*")]))


def validation_stages(config: Config, examples):
    """(StatisticsGen, CuratedSchemaGen, ExampleValidator, AnomaliesGate)."""
    # Per-split statistics of the shards.
    statistics_gen = StatisticsGen(examples=examples)
    # The curated schema from schemas/, resolved for this sequence length.
    schema_gen = CuratedSchemaGen(config)
    # Statistics checked against the schema.
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"])
    # Stops the run here, naming every anomaly, before anything trains on bad data.
    gate = AnomaliesGate(anomalies=example_validator.outputs["anomalies"])
    return statistics_gen, schema_gen, example_validator, gate


def training_stages(config: Config, examples, schema, gate, checkpoint_root: str):
    """(Tuner or None, the warm-start parent node or None, the Trainer), all after the gate."""
    # Optional: hyper-parameter search (tune.trials > 0), trials on the Trainer's training loop;
    # optional: the parent of a fine-tuning run (train.init_from), an input of the Trainer.
    tuner = make_tuner(config, examples, schema) if config.tune.trials > 0 else None
    if tuner:
        tuner.add_upstream_node(gate)
    base_model, parent_model = warm_start_parent(config)
    # The GPT language model: MirroredStrategy, mixed precision, accumulation, checkpoints, export.
    trainer = BigtrainTrainer(
        run_fn="components.training.run_fn.run_fn",
        examples=examples,
        schema=schema,
        hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
        base_model=parent_model,
        **trainer_properties(config, checkpoint_root)).with_id("Trainer")
    trainer.add_upstream_node(gate)
    return tuner, base_model, trainer


def release_stages(config: Config, examples, trainer, serving_dir: str):
    """(the latest blessed model's resolver, the Evaluator, the Pusher)."""
    # The latest blessed model (through MLMD): the baseline a new model must not be worse than.
    latest_blessed = Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    # Metrics of every exported variant on the eval split; export.serve's variant is blessed
    # against thresholds + baseline (+ its loss delta vs float when quantized).
    evaluator = LanguageModelEvaluator(
        examples=examples, model=trainer.outputs["model"],
        baseline_model=latest_blessed.outputs["model"], config=config,
        sets_fingerprint=sets_cache_key(config.eval))
    # Blessed models only, atomically, into <serving_dir>/<model name>/<version>/.
    pusher = AtomicPusher(
        model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(
                base_directory=os.path.join(serving_dir, config.model.name))),
        custom_config=stages.custom_config(PUSHER_READS, config)).with_id("Pusher")
    return latest_blessed, evaluator, pusher


def stages_until(components: list, until: str) -> list:
    """The stage named `until` and everything upstream of it, in pipeline order."""
    by_id = {c.id: c for c in components}
    if until not in by_id:
        from components.config import ConfigError
        raise ConfigError(f"--until {until!r}: no such stage; stages: {', '.join(by_id)}")
    keep, todo = set(), [by_id[until]]
    while todo:
        node = todo.pop()
        if node.id not in keep:
            keep.add(node.id)
            # Channel producers (TFX wires these edges only when the Pipeline is built) and
            # explicit upstream nodes (the gate before the Trainer).
            producers = set().union(*(channel.get_data_dependent_node_ids()
                                      for channel in node.inputs.values()))
            todo.extend(by_id[p] for p in producers if p in by_id)
            todo.extend(node.upstream_nodes)
    kept = [c for c in components if c.id in keep]
    for node in kept:  # edges to stages left out would make Pipeline() reject the DAG
        for downstream in list(node.downstream_nodes):
            if downstream.id not in keep:
                node.remove_downstream_node(downstream)
    return kept
