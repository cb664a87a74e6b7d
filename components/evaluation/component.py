"""LanguageModelEvaluator: measures the exported SavedModel (what will be served) on the eval split,
compares it with the latest blessed model, and emits standard ModelEvaluation and ModelBlessing
artifacts (the `blessed` / `current_model_id` properties TFX's Pusher and
LatestBlessedModelStrategy read)."""

from __future__ import annotations

import json
import logging
import os

from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.evaluation import properties as eval_props
from components import config as config_lib
from components.config import stages
from components.storage import fs, splits
from components.common.figures import set_figure
from components.evaluation import held_out_sets
from components.evaluation.decision import Decision, decide_serving
from components.evaluation.documents import DOCUMENT_COUNTS, DOCUMENT_FIGURES
from components.evaluation.tasks import TASK_COUNTS, TASK_FIGURES
from components.evaluation.measure import (comparable_baseline, evaluate_saved_model,
                                           measure_documents_and_tasks, measure_variants,
                                           memoized_metrics, saved_model_loader)
from components.tokenizer.artifact import examples_tokenizer

METRICS_FILE = "metrics.json"
DIVERGED = "the model's eval loss is not finite: its training diverged"
LOGGER = logging.getLogger("bigtrain.eval")


def evaluation_properties(evaluation, candidate: dict, baseline_metrics: dict | None,
                          variant_metrics: dict, fitness: dict, serve: str) -> None:
    """The ModelEvaluation's MLMD properties: the float model's figures, the baseline's, and per
    variant <variant>_loss, _loss_delta (vs float), _loss_delta_se, _batches (measured on),
    _size_bytes, _latency_ms, _fit_to_serve, _reason."""
    for name in eval_props.FIGURES:
        set_figure(evaluation, name, float(candidate[name]), "Evaluator", hint=DIVERGED)
    evaluation.set_int_custom_property(eval_props.EXAMPLES, candidate["examples"])
    evaluation.set_int_custom_property(eval_props.SAMPLE_SEQUENCES, candidate["sample_sequences"])
    evaluation.set_int_custom_property(eval_props.TOKENS, candidate["tokens"])
    if baseline_metrics is not None:
        set_figure(evaluation, eval_props.BASELINE_LOSS, float(baseline_metrics["loss"]), "Evaluator")
        if baseline_metrics.get("bits_per_byte") is not None:
            set_figure(evaluation, eval_props.BASELINE_BITS_PER_BYTE,
                       float(baseline_metrics["bits_per_byte"]), "Evaluator")
    evaluation.set_string_custom_property(eval_props.VARIANTS, ",".join(variant_metrics))
    evaluation.set_string_custom_property(eval_props.SERVE_VARIANT, serve)
    for name, m in variant_metrics.items():
        for figure in eval_props.VARIANT_FIGURES:
            if m.get(figure) is not None:
                set_figure(evaluation, eval_props.variant_property(name, figure), float(m[figure]),
                           "Evaluator", hint=f"the {name} variant's {figure}")
        for figure in eval_props.VARIANT_COUNTS:
            if figure in m:
                evaluation.set_int_custom_property(eval_props.variant_property(name, figure),
                                                   int(m[figure]))
        evaluation.set_int_custom_property(eval_props.variant_property(name, eval_props.FIT_TO_SERVE),
                                           int(fitness[name].blessed))
        evaluation.set_string_custom_property(
            eval_props.variant_property(name, eval_props.VARIANT_REASON), fitness[name].reason)


def log_documents(documents: dict) -> None:
    """One console line per whole-document figure set: the eval split's, each held-out set's."""
    named = ([("whole documents", documents)] if "document_bits_per_byte" in documents else []) + \
        [(f"held-out {name}", figures) for name, figures in documents["sets"].items()]
    for label, f in named:
        LOGGER.info("%s: %.4f bits/byte (zlib-9 %.4f, lzma-9 %.4f, each document alone) on %d "
                    "documents, %d bytes", label, f["document_bits_per_byte"],
                    f["document_zlib9_bits_per_byte"], f["document_lzma9_bits_per_byte"],
                    f["document_count"], f["document_bytes"])


def document_properties(evaluation, figures: dict) -> None:
    """The whole-document figures (components/evaluation/documents.py) as MLMD properties."""
    for name in DOCUMENT_FIGURES:
        if name in figures:
            set_figure(evaluation, name, float(figures[name]), "Evaluator",
                       hint="the whole-document evaluation")
    for name in DOCUMENT_COUNTS:
        if name in figures:
            evaluation.set_int_custom_property(name, int(figures[name]))
    if "document_variant" in figures:
        evaluation.set_string_custom_property(eval_props.DOCUMENT_VARIANT, figures["document_variant"])
    sets = figures.get("sets") or {}
    evaluation.set_string_custom_property(held_out_sets.SETS_PROPERTY, ",".join(sets))
    for name, value in held_out_sets.flat_properties(sets).items():
        set_figure(evaluation, name, value, "Evaluator", hint="a held-out set's evaluation")


def task_properties(evaluation, figures: dict) -> None:
    """The code tasks' figures (components/evaluation/tasks.py) as MLMD properties."""
    for name in TASK_FIGURES:
        if name in figures:
            set_figure(evaluation, name, float(figures[name]), "Evaluator", hint="the code tasks")
    for name in TASK_COUNTS:
        if name in figures:
            evaluation.set_int_custom_property(name, int(figures[name]))
    if "task_set" in figures:
        evaluation.set_string_custom_property(eval_props.TASK_SET, figures["task_set"])


def with_set_gates(decision: Decision, documents: dict, baseline_documents: dict | None,
                   tasks: dict, eval_config) -> Decision:
    """The blessing with every eval.sets gate and the task gate applied: a failing one
    un-blesses, named."""
    failures = held_out_sets.gate_failures(documents.get("sets") or {},
                                           (baseline_documents or {}).get("sets"), eval_config)
    failures += [f for f in [held_out_sets.task_gate_failure(tasks, eval_config)] if f]
    if not failures:
        return decision
    earlier = [] if decision.blessed else [decision.reason[len("not blessed: "):]]
    return Decision(False, "not blessed: " + "; ".join(earlier + failures))


def write_blessing(blessing, decision: Decision, model, baseline, serve: str, manifest: dict) -> None:
    """Standard ModelBlessing: the properties TFX's Pusher and LatestBlessedModelStrategy read,
    plus the file TFMA's Evaluator writes."""
    fs.makedirs(blessing.uri)
    fs.write_bytes(os.path.join(blessing.uri, "BLESSED" if decision.blessed else "NOT_BLESSED"), b"")
    blessing.set_int_custom_property(eval_props.BLESSED, int(decision.blessed))
    blessing.set_string_custom_property(eval_props.CURRENT_MODEL, model.uri)
    blessing.set_int_custom_property(eval_props.CURRENT_MODEL_ID, model.id)
    blessing.set_string_custom_property(eval_props.REASON, decision.reason)
    blessing.set_string_custom_property(eval_props.SERVE_VARIANT, serve)
    if serve in manifest:
        blessing.set_string_custom_property(eval_props.SERVE_PATH, manifest[serve]["path"])
    if baseline is not None:
        blessing.set_string_custom_property(eval_props.BASELINE_MODEL, baseline.uri)
        blessing.set_int_custom_property(eval_props.BASELINE_MODEL_ID, baseline.id)


class LanguageModelEvaluatorExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties):
        from tfx.utils import path_utils
        from components.common.heap import heap_frozen
        from components.serving import variants
        config = stages.read_back(EVALUATOR_READS, exec_properties)
        eval_config, serve = config.eval, config.export.serve
        examples = artifact_utils.get_single_instance(input_dict["examples"])
        model = artifact_utils.get_single_instance(input_dict["model"])
        baseline = comparable_baseline(next(iter(input_dict.get("baseline_model") or []), None), model)
        eval_files = [os.path.join(splits.split_dir(examples.uri, "eval"), "*")]
        tokenizer = examples_tokenizer(examples.uri)
        per_token = tokenizer.kind == "bytes"   # byte-level examples: the nats/token gates apply
        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        cache_dir = os.path.join(os.path.dirname(os.path.dirname(evaluation.uri)), ".metrics_cache")

        def memoize(model_key, compute):
            return memoized_metrics(cache_dir, model_key, examples.uri, eval_config, compute)

        manifest = variants.read_manifest(model.uri)
        load = saved_model_loader()   # each SavedModel loaded once for all the figures below
        with heap_frozen():   # no full passes over the TF/TFX heap while the eval loops allocate
            variant_metrics = measure_variants(model.uri, manifest, eval_files, eval_config,
                                               tokenizer, memoize, load)
            documents, tasks, baseline_documents = measure_documents_and_tasks(
                model.uri, manifest.get(serve, manifest["float"]), baseline, examples.uri,
                eval_config, tokenizer, memoize, load)
            baseline_metrics = None if baseline is None else memoize(
                baseline.uri, lambda: evaluate_saved_model(path_utils.serving_model_path(baseline.uri),
                                                           eval_files, eval_config, tokenizer, load))
        candidate = variant_metrics["float"]
        fitness = {n: Decision(*fit) for n, fit in variants.recommend_all(variant_metrics, eval_config).items()}
        decision = with_set_gates(decide_serving(serve, variant_metrics, fitness, baseline_metrics,
                                                 eval_config, per_token),
                                  documents, baseline_documents, tasks, eval_config)
        LOGGER.info("evaluation: loss %.4f nats/token, %.4f bits/byte, perplexity %.2f, accuracy "
                    "%.4f on %d tokens; %s", candidate["loss"], candidate["bits_per_byte"],
                    candidate["perplexity"], candidate["accuracy"], candidate["tokens"],
                    decision.reason)
        log_documents(documents)
        record = {"candidate": candidate, "baseline": baseline_metrics, "documents": documents,
                  "baseline_documents": baseline_documents, "tasks": tasks,
                  "baseline_model_id": baseline.id if baseline else None,
                  "thresholds": config_lib.to_dict(eval_config),
                  "blessed": decision.blessed, "reason": decision.reason, "serve_variant": serve,
                  "variants": {name: dict(m, fit_to_serve=fitness[name].blessed,
                                          reason=fitness[name].reason)
                               for name, m in variant_metrics.items()}}
        fs.makedirs(evaluation.uri)
        fs.write_text(os.path.join(evaluation.uri, METRICS_FILE),
                      json.dumps(record, indent=2, sort_keys=True))
        evaluation_properties(evaluation, candidate, baseline_metrics, variant_metrics, fitness, serve)
        document_properties(evaluation, documents)
        task_properties(evaluation, tasks)
        write_blessing(artifact_utils.get_single_instance(output_dict["blessing"]), decision,
                       model, baseline, serve, manifest)


# What the Evaluator reads (its one declaration, components/config/stages.py): the eval section
# (its measurements and gates) and the export section (serve: the variant it blesses; quantize:
# the variants it measures), as the execution properties eval_config and export_config.
EVALUATOR_READS = stages.StageReads(
    stage="LanguageModelEvaluator", declared_in="components/evaluation/component.py EVALUATOR_READS",
    sections={"eval": stages.ALL, "export": stages.ALL},
    keys={"eval": "eval_config", "export": "export_config"})


class LanguageModelEvaluatorSpec(ComponentSpec):
    # sets_fingerprint: the content digest of eval.sets' files (held_out_sets.sets_fingerprint),
    # in the cache key so a rewritten set file runs the Evaluator again; the executor keys its
    # memoized figures on the digest it computes itself.
    PARAMETERS = {"eval_config": ExecutionParameter(type=str),
                  "export_config": ExecutionParameter(type=str, optional=True),
                  "sets_fingerprint": ExecutionParameter(type=str, optional=True)}
    INPUTS = {
        "examples": ChannelParameter(type=standard_artifacts.Examples),
        "model": ChannelParameter(type=standard_artifacts.Model),
        "baseline_model": ChannelParameter(type=standard_artifacts.Model, optional=True),
    }
    OUTPUTS = {
        "evaluation": ChannelParameter(type=standard_artifacts.ModelEvaluation),
        "blessing": ChannelParameter(type=standard_artifacts.ModelBlessing),
    }


class LanguageModelEvaluator(base_component.BaseComponent):
    SPEC_CLASS = LanguageModelEvaluatorSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(LanguageModelEvaluatorExecutor)

    def __init__(self, examples, model, config: config_lib.Config, baseline_model=None,
                 sets_fingerprint: str = ""):
        super().__init__(spec=LanguageModelEvaluatorSpec(
            examples=examples, model=model, baseline_model=baseline_model,
            sets_fingerprint=sets_fingerprint, **stages.handoff(EVALUATOR_READS, config),
            evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
            blessing=types.Channel(type=standard_artifacts.ModelBlessing)))
