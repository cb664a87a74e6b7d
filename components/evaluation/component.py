"""LanguageModelEvaluator: measures the exported SavedModel (what will be served) on the eval split,
compares it with the latest blessed model, and emits standard ModelEvaluation and ModelBlessing
artifacts (the `blessed` / `current_model_id` properties TFX's Pusher and
LatestBlessedModelStrategy read)."""

from __future__ import annotations

from components.common import fs
import hashlib
import json
import logging
import os
from dataclasses import dataclass

from tfx import types
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components import config as config_lib

METRICS_FILE = "metrics.json"
LOGGER = logging.getLogger("bigtrain.eval")


@dataclass(frozen=True)
class Decision:
    blessed: bool
    reason: str


def regression_failure(candidate: dict, baseline: dict | None, eval_config) -> str | None:
    """The baseline gate (float model vs the baseline's float model), or None when it holds."""
    if baseline is None or candidate["loss"] <= baseline["loss"] + eval_config.max_loss_regression:
        return None
    return (f"loss {candidate['loss']:.4f} > baseline loss {baseline['loss']:.4f} "
            f"+ eval.max_loss_regression {eval_config.max_loss_regression:.4f}")


def decide_blessing(candidate: dict, baseline: dict | None, eval_config,
                    per_token: bool = True) -> Decision:
    """Blessed iff every absolute threshold holds AND the loss is not worse than the baseline's
    by more than eval.max_loss_regression. The reason names the threshold, value and baseline.
    per_token=False (a subword tokenizer): the nats/token gates are skipped, the bits-per-byte
    gates (eval.max_bits_per_byte, eval.max_bits_per_byte_regression) still apply."""
    failures = []
    bpb_max = getattr(eval_config, "max_bits_per_byte", 0.0)
    bpb_regression = getattr(eval_config, "max_bits_per_byte_regression", -1.0)
    bpb = candidate.get("bits_per_byte")
    if bpb is not None and bpb_max > 0 and bpb > bpb_max:
        failures.append(f"bits per byte {bpb:.4f} > eval.max_bits_per_byte {bpb_max:.4f}")
    if (bpb is not None and baseline is not None and bpb_regression >= 0
            and baseline.get("bits_per_byte") is not None
            and bpb > baseline["bits_per_byte"] + bpb_regression):
        failures.append(f"bits per byte {bpb:.4f} > baseline {baseline['bits_per_byte']:.4f} + "
                        f"eval.max_bits_per_byte_regression {bpb_regression:.4f}")
    if not per_token:
        if failures:
            return Decision(False, "not blessed: " + "; ".join(failures))
        versus = (f"baseline {baseline['bits_per_byte']:.4f} bits/byte"
                  if baseline is not None and baseline.get("bits_per_byte") is not None
                  else "no comparable baseline")
        return Decision(True, f"blessed: {bpb:.4f} bits/byte (nats/token gates apply to byte "
                              f"models only), {versus}")
    if candidate["loss"] > eval_config.max_loss:
        failures.append(f"loss {candidate['loss']:.4f} > eval.max_loss {eval_config.max_loss:.4f}")
    if candidate["accuracy"] < eval_config.min_accuracy:
        failures.append(f"accuracy {candidate['accuracy']:.4f} < eval.min_accuracy "
                        f"{eval_config.min_accuracy:.4f}")
    regression = regression_failure(candidate, baseline, eval_config)
    if regression:
        failures.append(regression)
    if failures:
        return Decision(False, "not blessed: " + "; ".join(failures))
    versus = (f"baseline loss {baseline['loss']:.4f} (+{eval_config.max_loss_regression:g} allowed)"
              if baseline is not None else "no blessed baseline yet")
    return Decision(True, f"blessed: loss {candidate['loss']:.4f} <= eval.max_loss "
                          f"{eval_config.max_loss:.4f}, accuracy {candidate['accuracy']:.4f} >= "
                          f"{eval_config.min_accuracy:.4f}, {versus}")


def examples_tokenization(examples_uri: str) -> dict:
    """pad_id and token_bytes of the tokenizer the examples were encoded with (bytes if none)."""
    from components.tokenizer import artifact as tokenizer_artifact
    directory = tokenizer_artifact.examples_tokenizer_dir(examples_uri)
    if not fs.isdir(directory):
        return {}
    tokenizer = tokenizer_artifact.load(directory)
    return {"pad_id": tokenizer.pad_id, "token_bytes": tokenizer.token_byte_lengths()}


def evaluate_saved_model(serving_dir: str, eval_files, eval_config, tokenization=None) -> dict:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the SentencePiece ops a model may embed
    from components.training.metrics import evaluate_logits_fn
    loaded = tf.saved_model.load(serving_dir)
    with tf.io.gfile.GFile(os.path.join(serving_dir, "assets.extra", "bigtrain_model.json")) as fh:
        seq_len = json.load(fh)["context_length"]
    signature = loaded.signatures["token_logits"]
    return evaluate_logits_fn(lambda ids: signature(input_ids=ids)["logits"], eval_files, seq_len,
                              eval_config.batch_size, eval_config.max_batches,
                              **(tokenization or {}))


def evaluate_variant(model_dir: str, entry: dict, eval_files, eval_config,
                     tokenization=None) -> dict:
    """Metrics of one exported variant (SavedModel or TFLite) on the same eval sequences as the
    float model, plus its size on disk and the median latency of token_logits on one eval batch."""
    import tensorflow as tf
    from components.training.metrics import evaluate_logits_fn, latency_ms
    from components.training import variants
    with tf.io.gfile.GFile(os.path.join(model_dir, variants.DIRS["float"], "assets.extra",
                                        "bigtrain_model.json")) as fh:
        seq_len = json.load(fh)["context_length"]
    logits_fn = variants.logits_fn(model_dir, entry)
    in_graph = entry["format"] == "saved_model"
    metrics = evaluate_logits_fn(logits_fn, eval_files, seq_len, eval_config.batch_size,
                                 eval_config.max_batches, in_graph=in_graph,
                                 **(tokenization or {}))
    metrics["latency_ms"] = latency_ms(logits_fn, eval_files, seq_len, eval_config.batch_size)
    metrics["size_bytes"] = variants.size_bytes(os.path.join(model_dir, entry["path"]))
    return metrics


def variant_fitness(float_loss: float, variant_loss: float, max_delta: float) -> Decision:
    """A quantized variant is fit to serve iff its loss exceeds the float model's (same
    sequences) by at most eval.max_quantization_loss_delta."""
    delta = variant_loss - float_loss
    if delta > max_delta:
        return Decision(False, f"not fit to serve: loss {variant_loss:.4f} is float {float_loss:.4f} "
                               f"{delta:+.4f} > eval.max_quantization_loss_delta {max_delta:.4f}")
    return Decision(True, f"fit to serve: loss delta {delta:+.4f} <= eval.max_quantization_loss_delta "
                          f"{max_delta:.4f}")


def decide_serving(serve: str, variant_metrics: dict, fitness: dict, baseline: dict | None,
                   eval_config, per_token: bool = True) -> Decision:
    """Blessing of the variant export.serve names: the thresholds and the baseline applied to its
    own metrics, and for a quantized variant its fitness against the float model."""
    if serve not in variant_metrics:
        return Decision(False, f"not blessed: export.serve variant {serve!r} was not exported "
                               f"(have {sorted(variant_metrics)})")
    if serve == "float":
        return decide_blessing(variant_metrics[serve], baseline, eval_config, per_token)
    # A quantized variant: the absolute thresholds apply to what is served; the baseline gate
    # compares like with like (this float model vs the baseline's float model: training quality),
    # and the quantization cost is bounded separately by the variant's fitness.
    decision = decide_blessing(variant_metrics[serve], None, eval_config, per_token)
    if baseline is not None:
        quality = decide_blessing(variant_metrics["float"], baseline, eval_config, per_token)
        if not quality.blessed:
            failures = [decision.reason[len("not blessed: "):]] if not decision.blessed else []
            decision = Decision(False, "not blessed: " + "; ".join(
                failures + ["float model " + quality.reason[len("not blessed: "):]]))
        elif decision.blessed:
            decision = Decision(True, f"{decision.reason}; float model vs baseline: "
                                      f"{quality.reason[len('blessed: '):]}")
    fit = fitness[serve]
    if not fit.blessed:
        failures = [decision.reason[len("not blessed: "):]] if not decision.blessed else []
        return Decision(False, "not blessed: " + "; ".join(failures + [f"{serve} variant {fit.reason}"]))
    return Decision(decision.blessed, f"{decision.reason} ({serve} variant served, {fit.reason})")


def memoized_metrics(cache_dir: str, model_uri: str, examples_uri: str, eval_config, compute) -> dict:
    """Metrics of (model, eval split, eval config), computed once. Evaluation is deterministic
    (unshuffled batches, fixed weights), so re-evaluating the same model against a new baseline
    on a cached re-run costs a file read instead of a pass over the eval split."""
    key = hashlib.sha256("|".join([model_uri, examples_uri, config_lib.section_json(eval_config)])
                         .encode()).hexdigest()[:24]
    path = os.path.join(cache_dir, f"{key}.json")
    if fs.exists(path):
        return json.loads(fs.read_text(path))
    metrics = compute()
    fs.makedirs(cache_dir)
    fs.write_text(path, json.dumps(metrics))
    return metrics


def same_vocabulary(baseline_uri: str, model_uri: str) -> bool:
    """Whether two Model artifacts were trained on the same tokenizer (assets.extra metadata)."""
    from tfx.utils import path_utils

    def tokenizer_of(uri):
        path = os.path.join(path_utils.serving_model_path(uri), "assets.extra", "bigtrain_model.json")
        try:
            meta = json.loads(fs.read_text(path))
        except OSError:
            return None
        return json.dumps([meta.get("vocab_size"), meta.get("tokenizer")], sort_keys=True)
    return tokenizer_of(baseline_uri) == tokenizer_of(model_uri)


class LanguageModelEvaluatorExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties):
        from tfx.utils import path_utils
        from components.training import variants
        eval_config = config_lib.from_dict(config_lib.EvalConfig,
                                           json.loads(exec_properties["eval_config"]))
        export_config = config_lib.from_dict(config_lib.ExportConfig,
                                             json.loads(exec_properties.get("export_config") or "{}"))
        examples = artifact_utils.get_single_instance(input_dict["examples"])
        model = artifact_utils.get_single_instance(input_dict["model"])
        baselines = input_dict.get("baseline_model") or []
        baseline = baselines[0] if baselines else None
        eval_files = [os.path.join(examples.uri, "Split-eval", "*")]
        tokenization = examples_tokenization(examples.uri)
        per_token = not tokenization   # byte-level examples: the nats/token gates apply
        if baseline is not None and not same_vocabulary(baseline.uri, model.uri):
            # Its ids mean other text: it cannot be measured on these examples.
            LOGGER.info("baseline model %s uses another tokenizer: no baseline comparison",
                        baseline.uri)
            baseline = None

        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        cache_dir = os.path.join(os.path.dirname(os.path.dirname(evaluation.uri)), ".metrics_cache")

        def metrics_of(m):
            return memoized_metrics(cache_dir, m.uri, examples.uri, eval_config, lambda: evaluate_saved_model(
                path_utils.serving_model_path(m.uri), eval_files, eval_config, tokenization))

        # Every exported variant, measured on the same sequences (memoized per model and variant;
        # the float one under the model's own key, which is also how a baseline is looked up).
        manifest = variants.read_manifest(model.uri)
        variant_metrics = {
            name: memoized_metrics(cache_dir, model.uri if name == "float" else f"{model.uri}#{name}",
                                   examples.uri, eval_config,
                                   lambda entry=entry: evaluate_variant(model.uri, entry, eval_files,
                                                                        eval_config, tokenization))
            for name, entry in manifest.items()}
        candidate = variant_metrics["float"]
        baseline_metrics = metrics_of(baseline) if baseline is not None else None
        for name in variant_metrics:
            variant_metrics[name]["loss_delta"] = variant_metrics[name]["loss"] - variant_metrics["float"]["loss"]
        fitness = {n: Decision(*fit) for n, fit in variants.recommend_all(variant_metrics, eval_config).items()}
        serve = export_config.serve
        decision = decide_serving(serve, variant_metrics, fitness, baseline_metrics, eval_config,
                                  per_token)
        LOGGER.info("evaluation: loss %.4f nats/token, %.4f bits/byte, perplexity %.2f, accuracy "
                    "%.4f on %d tokens; %s", candidate["loss"], candidate["bits_per_byte"],
                    candidate["perplexity"], candidate["accuracy"], candidate["tokens"],
                    decision.reason)

        blessing = artifact_utils.get_single_instance(output_dict["blessing"])
        record = {"candidate": candidate, "baseline": baseline_metrics,
                  "baseline_model_id": baseline.id if baseline else None,
                  "thresholds": config_lib.to_dict(eval_config),
                  "blessed": decision.blessed, "reason": decision.reason, "serve_variant": serve,
                  "variants": {name: dict(m, fit_to_serve=fitness[name].blessed, reason=fitness[name].reason)
                               for name, m in variant_metrics.items()}}
        fs.makedirs(evaluation.uri)
        fs.write_text(os.path.join(evaluation.uri, METRICS_FILE),
                      json.dumps(record, indent=2, sort_keys=True))
        for name in ("loss", "perplexity", "accuracy", "bits_per_byte"):
            evaluation.set_float_custom_property(name, float(candidate[name]))
        evaluation.set_int_custom_property("examples", candidate["examples"])
        evaluation.set_int_custom_property("tokens", candidate["tokens"])
        if baseline_metrics is not None:
            evaluation.set_float_custom_property("baseline_loss", float(baseline_metrics["loss"]))
            if baseline_metrics.get("bits_per_byte") is not None:
                evaluation.set_float_custom_property("baseline_bits_per_byte",
                                                     float(baseline_metrics["bits_per_byte"]))
        # Per variant: <variant>_loss, _loss_delta (vs float), _size_bytes, _latency_ms, _fit_to_serve, _reason.
        evaluation.set_string_custom_property("variants", ",".join(variant_metrics))
        evaluation.set_string_custom_property("serve_variant", serve)
        for name, m in variant_metrics.items():
            for figure in ("loss", "loss_delta", "latency_ms"):
                if figure in m:
                    evaluation.set_float_custom_property(f"{name}_{figure}", float(m[figure]))
            if "size_bytes" in m:
                evaluation.set_int_custom_property(f"{name}_size_bytes", int(m["size_bytes"]))
            evaluation.set_int_custom_property(f"{name}_fit_to_serve", int(fitness[name].blessed))
            evaluation.set_string_custom_property(f"{name}_reason", fitness[name].reason)

        # Standard ModelBlessing: the properties TFX's Pusher and LatestBlessedModelStrategy read,
        # plus the file TFMA's Evaluator writes.
        fs.makedirs(blessing.uri)
        fs.write_bytes(os.path.join(blessing.uri, "BLESSED" if decision.blessed else "NOT_BLESSED"), b"")
        blessing.set_int_custom_property("blessed", int(decision.blessed))
        blessing.set_string_custom_property("current_model", model.uri)
        blessing.set_int_custom_property("current_model_id", model.id)
        blessing.set_string_custom_property("reason", decision.reason)
        blessing.set_string_custom_property("serve_variant", serve)
        if serve in manifest:
            blessing.set_string_custom_property("serve_path", manifest[serve]["path"])
        if baseline is not None:
            blessing.set_string_custom_property("baseline_model", baseline.uri)
            blessing.set_int_custom_property("baseline_model_id", baseline.id)


class LanguageModelEvaluatorSpec(ComponentSpec):
    PARAMETERS = {"eval_config": ExecutionParameter(type=str),
                  "export_config": ExecutionParameter(type=str, optional=True)}
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

    def __init__(self, examples, model, eval_config, baseline_model=None, export_config=None):
        super().__init__(spec=LanguageModelEvaluatorSpec(
            examples=examples, model=model, baseline_model=baseline_model,
            eval_config=config_lib.section_json(eval_config),
            export_config=config_lib.section_json(export_config or config_lib.ExportConfig()),
            evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
            blessing=types.Channel(type=standard_artifacts.ModelBlessing)))
