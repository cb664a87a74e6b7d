"""The Evaluator's measurements as plain functions: the exported variants and the baseline on the
same eval sequences (variants on a paired subset), memoized per model and eval config."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import time

from components import config as config_lib
from components.config.evaluation import GATES
from components.config.heldout import SET_GATES
from components.storage import fs

LOGGER = logging.getLogger("bigtrain.eval")


def saved_model_loader():
    """path -> the loaded SavedModel, each path loaded at most once: one Evaluator run reads the
    float model for its window figures, its whole documents and its code tasks, and a baseline
    twice too (~1.3 s of CPU per load of the tiny model on the 2-core VM, 2026-11-27)."""
    @functools.cache
    def load(path: str):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  registers the SentencePiece ops a model may embed
        return tf.saved_model.load(path)
    return lambda path: load(path.rstrip("/"))


def evaluate_saved_model(serving_dir: str, eval_files, eval_config, tokenizer, load=None) -> dict:
    from components.serving.export import MODEL_INFO
    from components.metrics.lm import evaluate_logits_fn
    loaded = (load or saved_model_loader())(serving_dir)
    seq_len = json.loads(fs.read_text(fs.join(serving_dir, MODEL_INFO)))["context_length"]
    signature = loaded.signatures["token_logits"]
    return evaluate_logits_fn(lambda ids: signature(input_ids=ids)["logits"], eval_files, seq_len,
                              eval_config.batch_size, eval_config.max_batches, tokenizer=tokenizer)


def evaluate_documents(loaded, context: int, examples_uri: str, eval_config, tokenizer) -> dict:
    """The whole-document figures (components/evaluation/documents.py) of a loaded SavedModel
    through its token_logits: the eval split's (none when eval.document_bytes is 0) and, under
    "sets", each eval.sets held-out set's."""
    import tensorflow as tf
    from components.evaluation import documents as documents_lib
    from components.evaluation.held_out_sets import measure_sets
    from components.text_example_gen.eval_split import eval_split_documents
    signature = loaded.signatures["token_logits"]

    def logits_fn(ids):
        return signature(input_ids=tf.convert_to_tensor(ids, tf.int32))["logits"]
    figures = {"sets": measure_sets(logits_fn, context, eval_config, tokenizer)}
    if eval_config.document_bytes > 0:
        chosen = documents_lib.choose_documents(
            eval_split_documents(examples_uri, "the Evaluator's whole-document sample", tokenizer),
            tokenizer.token_byte_lengths(), eval_config.document_bytes,
            eval_config.max_document_bytes)
        figures.update(documents_lib.document_figures(
            logits_fn, chosen, tokenizer, context=context,
            stride_context=eval_config.stride_context, batch_size=eval_config.batch_size))
    return figures


def measure_documents_and_tasks(model_uri: str, served: dict, baseline, examples_uri: str,
                                eval_config, tokenizer, memoize, load
                                ) -> tuple[dict, dict, dict | None]:
    """(whole-document figures, code-task figures) of the served variant (manifest entry
    `served`, a SavedModel), and the baseline's float figures when a held-out set's regression
    gate needs them (else None); each memoized per model like the window metrics."""
    from components.evaluation.held_out_sets import run_set_tasks, sets_fingerprint
    from components.serving import variants
    context = variants.float_model_info(model_uri)["context_length"]
    path = os.path.join(model_uri, served["path"])
    sets = sets_fingerprint(eval_config)   # an edited set file is measured again
    # Keyed by the variant served (export.serve), which is not in the eval section
    served_key = f"{model_uri}#{served['path']}"
    documents = memoize(f"{served_key}#documents#{sets}", lambda: dict(evaluate_documents(
        load(path), context, examples_uri, eval_config, tokenizer), document_variant=served["path"]))
    tasks = memoize(f"{served_key}#tasks#{sets}", lambda: run_set_tasks(load(path), context,
                                                                        eval_config, tokenizer))
    gated = any(s.max_bits_per_byte_regression >= 0 for s in eval_config.sets)
    if baseline is None or not gated:
        return documents, tasks, None
    base = os.path.join(baseline.uri, variants.read_manifest(baseline.uri)["float"]["path"])
    baseline_documents = memoize(
        f"{baseline.uri}#documents#{sets}", lambda: evaluate_documents(
            load(base), variants.float_model_info(baseline.uri)["context_length"], examples_uri,
            eval_config, tokenizer))
    return documents, tasks, baseline_documents


def evaluate_variant(model_dir: str, entry: dict, eval_files, eval_config, tokenizer,
                     max_batches: int | None = None, load=None) -> dict:
    """Metrics of one exported variant (SavedModel or TFLite) on the first max_batches
    (default eval.max_batches) eval batches, the float model's sequences, plus its size on disk
    and the median latency of token_logits on one eval batch (the sample's first)."""
    from components.serving import variants
    from components.metrics.lm import eval_sample, evaluate_logits_fn, latency_ms
    seq_len = variants.float_model_info(model_dir)["context_length"]
    logits_fn = variants.logits_fn(model_dir, entry, load=load)
    batches = max_batches or eval_config.max_batches
    metrics = evaluate_logits_fn(logits_fn, eval_files, seq_len, eval_config.batch_size, batches,
                                 tokenizer=tokenizer, in_graph=entry["format"] == "saved_model")
    # The sample evaluate_logits_fn just drew (cached per process), so no second read.
    first_batch = eval_sample(eval_files, seq_len, eval_config.batch_size * max(batches, 0))[
        :eval_config.batch_size, :-1]
    metrics["latency_ms"] = latency_ms(logits_fn, first_batch)
    metrics["size_bytes"] = variants.size_bytes(os.path.join(model_dir, entry["path"]))
    return metrics


def variant_batch_count(eval_config) -> int:
    """How many of the float model's eval batches a variant is measured on: the first
    eval.variant_batches (0 = all eval.max_batches)."""
    if eval_config.variant_batches <= 0:
        return eval_config.max_batches
    return min(eval_config.variant_batches, eval_config.max_batches)


def paired_loss_delta(float_rows, variant_rows) -> tuple[float, float | None]:
    """Loss delta (nats/token) of a variant vs the float model over the batches the variant was
    measured on, and its standard error from the per-batch paired differences (None for one
    batch). Rows are evaluate_logits_fn's per-batch [loss sum, correct, tokens, bytes]; the
    delta is token-weighted, so it equals (variant loss sum - float loss sum) / tokens."""
    pairs = list(zip(float_rows, variant_rows))
    if len(pairs) != len(variant_rows) or any(f[2] != v[2] for f, v in pairs):
        raise ValueError(f"variant batches do not pair with the float model's (tokens "
                         f"{[v[2] for v in variant_rows]} vs {[f[2] for f in float_rows]}): "
                         f"not the same eval sequences")
    tokens = sum(v[2] for v in variant_rows)
    diffs = [((v[0] - f[0]) / v[2], v[2] / tokens) for f, v in pairs]
    delta = sum(d * w for d, w in diffs)
    if len(diffs) < 2:
        return delta, None
    variance = sum((w * (d - delta)) ** 2 for d, w in diffs) * len(diffs) / (len(diffs) - 1)
    return delta, math.sqrt(variance)


def variant_estimate(float_metrics: dict, measured: dict) -> dict:
    """A variant's figures over the float model's whole sample: the float model's plus the
    paired difference on the batches the variant was measured on (the difference estimator:
    the paired difference varies far less from batch to batch than either loss does). The
    variant's own figures on those batches stay under measured_*."""
    rows = measured["batches"]
    float_rows = float_metrics["batches"][:len(rows)]
    delta, se = paired_loss_delta(float_rows, rows)
    tokens = sum(v[2] for v in rows)
    accuracy_delta = (sum(v[1] for v in rows) - sum(f[1] for f in float_rows)) / tokens
    bytes_measured = max(sum(v[3] for v in rows), 1.0)
    bpb_delta = (sum(v[0] for v in rows) - sum(f[0] for f in float_rows)) / bytes_measured / math.log(2)
    loss = float_metrics["loss"] + delta
    estimate = {f"measured_{k}": measured[k] for k in ("loss", "accuracy", "bits_per_byte", "tokens")}
    estimate.update(
        loss=loss, loss_delta=delta, loss_delta_se=se, batches=len(rows),
        accuracy=float_metrics["accuracy"] + accuracy_delta,
        bits_per_byte=float_metrics["bits_per_byte"] + bpb_delta,
        perplexity=math.exp(min(loss, 50.0)), examples=float_metrics["examples"],
        tokens=float_metrics["tokens"], latency_ms=measured["latency_ms"],
        size_bytes=measured["size_bytes"])
    return estimate


def measurement_json(eval_config) -> str:
    """The eval section with its gates (GATES, each held-out set's SET_GATES) at their defaults,
    as canonical JSON: what the Evaluator's measurements depend on."""
    sets = tuple(config_lib.section_without(s, *SET_GATES) for s in eval_config.sets)
    return config_lib.section_json(dataclasses.replace(
        config_lib.section_without(eval_config, *GATES), sets=sets))


def memoized_metrics(cache_dir: str, model_uri: str, examples_uri: str, eval_config, compute) -> dict:
    """Metrics of (model, eval split, eval config), computed once. Evaluation is deterministic
    (unshuffled batches, fixed weights), so re-evaluating the same model against a new baseline
    on a cached re-run costs a file read instead of a pass over the eval split. The key leaves
    the gates out (config GATES): a changed threshold decides again from the same figures."""
    key = hashlib.sha256("|".join([model_uri, examples_uri, measurement_json(eval_config)])
                         .encode()).hexdigest()[:24]
    path = fs.join(cache_dir, f"{key}.json")
    if fs.exists(path):
        return json.loads(fs.read_text(path))
    metrics = compute()
    fs.makedirs(cache_dir)
    fs.write_text(path, json.dumps(metrics))   # atomic: a unique temporary name, then rename
    return metrics


def same_vocabulary(baseline_uri: str, model_uri: str) -> bool:
    """Whether two Model artifacts were trained on the same tokenizer (assets.extra metadata)."""
    from tfx.utils import path_utils
    from components.serving.export import MODEL_INFO

    def tokenizer_of(uri):
        path = fs.join(path_utils.serving_model_path(uri), MODEL_INFO)
        if not fs.exists(path):
            return None
        meta = json.loads(fs.read_text(path))
        return json.dumps([meta.get("vocab_size"), meta.get("tokenizer")], sort_keys=True)
    return tokenizer_of(baseline_uri) == tokenizer_of(model_uri)


def comparable_baseline(baseline, model):
    """The baseline Model artifact, or None when there is none or it was trained on another
    tokenizer (its ids mean other text: it cannot be measured on these examples)."""
    if baseline is not None and not same_vocabulary(baseline.uri, model.uri):
        LOGGER.info("baseline model %s uses another tokenizer: no baseline comparison", baseline.uri)
        return None
    return baseline


def measure_variants(model_uri: str, manifest: dict, eval_files, eval_config, tokenizer,
                     memoize, load=None) -> dict:
    """Every exported variant on the float model's eval sequences: the float model on every eval
    batch (what the blessing gates read), each other variant on the first variant_batch_count
    of them, reported as variant_estimate. memoize(key, compute) caches raw measurements per
    model and variant (the float one under the model's own key, how a baseline is looked up)."""
    def measured(name, batches):
        started = time.perf_counter()
        metrics = memoize(model_uri if name == "float" else f"{model_uri}#{name}",
                          lambda: evaluate_variant(model_uri, manifest[name], eval_files,
                                                   eval_config, tokenizer, max_batches=batches,
                                                   load=load))
        LOGGER.info("%s variant: loss %.4f on %d eval batches (%.1f s)", name, metrics["loss"],
                    len(metrics["batches"]), time.perf_counter() - started)
        return metrics
    float_measured = measured("float", eval_config.max_batches)
    result = {"float": dict(float_measured, loss_delta=0.0, loss_delta_se=0.0,
                            batches=len(float_measured["batches"]))}
    for name in manifest:
        if name != "float":
            result[name] = variant_estimate(float_measured,
                                            measured(name, variant_batch_count(eval_config)))
    return result
