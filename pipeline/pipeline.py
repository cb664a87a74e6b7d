"""create_pipeline(config): wiring only. Runners add environment (paths, metadata, Beam args)."""

from __future__ import annotations

import os

from tfx import v1 as tfx

from tfx.dsl.components.base import executor_spec

from components import schema
from components.evaluation.component import LanguageModelEvaluator
from components.push_executor import AtomicPusherExecutor
from components.training.run_fn import TrainerExecutor, trainer_custom_config
from components.text_example_gen.component import TextExampleGen
from components.validation_gate import AnomaliesGate
from pipeline.config import Config


def create_pipeline(config: Config, *, pipeline_root: str, serving_dir: str,
                    metadata_connection_config=None,
                    beam_pipeline_args: list[str] | None = None,
                    enable_cache: bool = True) -> tfx.dsl.Pipeline:
    data = config.data
    if data.format == "text":
        # Raw text files -> byte-tokenized, packed, gzip TFRecord shards (train / eval).
        example_gen = TextExampleGen(data=data)
    else:
        # Already tokenized shards, imported as they are (and validated like any other).
        example_gen = tfx.components.ImportExampleGen(
            input_base=data.input,
            input_config=tfx.proto.Input(splits=[
                tfx.proto.Input.Split(name="train", pattern="train/*"),
                tfx.proto.Input.Split(name="eval", pattern="eval/*")]))

    # Per-split statistics of the shards.
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])

    # The curated schema from schemas/, resolved for this sequence length.
    schema_gen = tfx.components.ImportSchemaGen(
        schema_file=schema.write_resolved_schema(data.seq_len, os.path.join(pipeline_root, "schemas")))

    # Statistics checked against the schema.
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"])

    # Stops the run here, naming every anomaly, before anything trains on bad data.
    gate = AnomaliesGate(anomalies=example_validator.outputs["anomalies"])

    # The GPT language model: MirroredStrategy, mixed precision, accumulation, checkpoints, export.
    trainer = tfx.components.Trainer(
        run_fn="components.training.run_fn.run_fn",
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=config.train.train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=config.train.eval_batches),
        custom_config=trainer_custom_config(config, os.path.join(pipeline_root, "checkpoints")),
        custom_executor_spec=executor_spec.ExecutorClassSpec(TrainerExecutor))
    trainer.add_upstream_node(gate)

    # The latest blessed model (through MLMD): the baseline a new model must not be worse than.
    latest_blessed = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")

    # Metrics of the exported SavedModel on the eval split; blessed against thresholds + baseline.
    evaluator = LanguageModelEvaluator(
        examples=example_gen.outputs["examples"], model=trainer.outputs["model"],
        baseline_model=latest_blessed.outputs["model"], eval_config=config.eval)

    # Blessed models only, atomically, into <serving_dir>/<model name>/<version>/.
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(
                base_directory=os.path.join(serving_dir, config.model.name))),
        custom_executor_spec=executor_spec.ExecutorClassSpec(AtomicPusherExecutor))

    return tfx.dsl.Pipeline(
        pipeline_name=config.paths.pipeline_name,
        pipeline_root=pipeline_root,
        components=[example_gen, statistics_gen, schema_gen, example_validator, gate, trainer,
                    latest_blessed, evaluator, pusher],
        enable_cache=enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(beam_pipeline_args or []))
