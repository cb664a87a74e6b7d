"""The exported variants of one trained model, side by side in the Model artifact:

  <model uri>/Format-Serving/        float32 SavedModel, every signature (TFX's serving path)
  <model uri>/Format-Serving-int8/   the same signatures with Keras model.quantize("int8") weights
  <model uri>/Format-TFLite/model.tflite   token_logits, dynamic-range quantized (TFLiteConverter)
  <model uri>/Format-Weights/weights  the float weights by name, for warm starts (model/weights.py)
  <model uri>/variants.json          {variant: {"path": relative path, "format": ...}}

The Evaluator measures every variant listed in variants.json on the same eval sequences and
asks `recommend` (the one rule of a variant's fitness to serve); the Pusher pushes the one
export.serve names, when it is blessed.
"""

from __future__ import annotations

import json
import logging
import os
import time

import numpy as np
import tensorflow as tf

from components.storage import fs
from components.common.heap import heap_frozen
from components.model import weights
from components.model.gpt import build_model
from components.serving.export import MODEL_INFO, serving_copy, write_serving_model
from components.serving.server import DEFAULT_MAX_NEW_TOKENS_LIMIT

MANIFEST = "variants.json"
DIRS = {"float": "Format-Serving", "int8": "Format-Serving-int8", "tflite": "Format-TFLite"}
TFLITE_FILE = "model.tflite"
LOGGER = logging.getLogger("bigtrain.export")


def int8_copy(float_model, model_config, context_length: int):
    """Weight-only int8 (per-output-channel scales) of every Dense and Embedding layer through
    Keras' own model.quantize. The tied output head then reads the embedding dequantized
    (GPT.output_embedding); LayerNorms stay float32."""
    model = build_model(model_config, context_length, "float32", vocab_size=float_model.vocab_size)
    model.set_weights(float_model.get_weights())
    with heap_frozen():
        model.quantize("int8")
    return model


def write_tflite(float_saved_model: str, out_dir: str) -> str:
    """token_logits of the float SavedModel as a TFLite flatbuffer, dynamic-range quantized
    (int8 weights, float activations)."""
    converter = tf.lite.TFLiteConverter.from_saved_model(float_saved_model, signature_keys=["token_logits"])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    flatbuffer = converter.convert()
    tf.io.gfile.makedirs(out_dir)
    path = os.path.join(out_dir, TFLITE_FILE)
    with tf.io.gfile.GFile(path, "wb") as fh:
        fh.write(flatbuffer)
    return path


def export_variants(trained_model, model_config, context_length: int, model_dir: str, *,
                    tokenizer, quantize=("int8", "tflite"),
                    max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT,
                    metadata: dict | None = None) -> dict:
    """Write the float SavedModel and each requested variant under model_dir; returns the
    manifest (also written to model_dir/variants.json). tokenizer: the model's Tokenizer."""
    with heap_frozen():   # tracing the signatures allocates heavily: no full-heap passes meanwhile
        manifest = _export_each(trained_model, model_config, context_length, model_dir, quantize,
                                max_new_tokens_limit, metadata, tokenizer)
    with tf.io.gfile.GFile(os.path.join(model_dir, MANIFEST), "w") as fh:
        json.dump(manifest, fh, indent=2)
    return manifest


def _export_each(trained_model, model_config, context_length, model_dir, quantize,
                 max_new_tokens_limit, metadata, tokenizer) -> dict:
    float_model = serving_copy(trained_model, model_config, context_length)
    manifest = {}
    for variant in ("float",) + tuple(v for v in ("int8", "tflite") if v in quantize):
        started = time.perf_counter()
        path = os.path.join(model_dir, DIRS[variant])
        meta = dict(metadata or {}, variant=variant)
        if variant == "float":
            write_serving_model(float_model, context_length, path, metadata=meta,
                                max_new_tokens_limit=max_new_tokens_limit, tokenizer=tokenizer)
            # Named weights beside it: what a fine-tune (train.init_from) starts from.
            weights.save_weights(float_model, os.path.join(model_dir, weights.WEIGHTS_PREFIX))
            manifest[variant] = {"path": DIRS[variant], "format": "saved_model"}
        elif variant == "int8":
            write_serving_model(int8_copy(float_model, model_config, context_length), context_length,
                                path, metadata=meta, max_new_tokens_limit=max_new_tokens_limit,
                                tokenizer=tokenizer)
            manifest[variant] = {"path": DIRS[variant], "format": "saved_model"}
        else:
            write_tflite(os.path.join(model_dir, DIRS["float"]), path)
            manifest[variant] = {"path": os.path.join(DIRS[variant], TFLITE_FILE), "format": "tflite"}
        manifest[variant]["size_bytes"] = size_bytes(os.path.join(model_dir, manifest[variant]["path"]))
        LOGGER.info("exported %s variant: %s (%d bytes, %.1f s)", variant, path,
                    manifest[variant]["size_bytes"], time.perf_counter() - started)
    return manifest


def read_manifest(model_dir: str) -> dict:
    """variants.json, or the float SavedModel alone for models exported before variants."""
    path = os.path.join(model_dir, MANIFEST)
    if not tf.io.gfile.exists(path):
        return {"float": {"path": DIRS["float"], "format": "saved_model"}}
    with tf.io.gfile.GFile(path) as fh:
        return json.load(fh)


def size_bytes(path: str) -> int:
    if not fs.isdir(path):
        return fs.size(path)
    return sum(fs.size(fs.join(path, rel)) for rel in fs.walk_files(path))


def recommend(variant_figures: dict, float_figures: dict, max_loss_delta: float = 0.05,
              max_size_ratio: float = 1.0, max_latency_ratio: float = 1.1) -> tuple[bool, str]:
    """Is a variant worth serving instead of the float model? Figures: loss (same eval sequences),
    size_bytes, latency_ms (token_logits on one eval batch). Not recommended when its loss exceeds
    float's by more than max_loss_delta, or it is larger or slower than float (by the ratios);
    the reason names every failed check with both figures."""
    if variant_figures is float_figures:
        return True, "fit to serve: the float model"
    delta = variant_figures["loss"] - float_figures["loss"]
    size, float_size = variant_figures["size_bytes"], float_figures["size_bytes"]
    latency, float_latency = variant_figures["latency_ms"], float_figures["latency_ms"]
    failures = []
    if delta > max_loss_delta:
        failures.append(f"loss {variant_figures['loss']:.4f} is float {float_figures['loss']:.4f} "
                        f"{delta:+.4f} > eval.max_quantization_loss_delta {max_loss_delta:.4f}")
    if size > max_size_ratio * float_size:
        failures.append(f"larger than float: {size:,} bytes vs {float_size:,} "
                        f"(> eval.max_variant_size_ratio {max_size_ratio:g})")
    if latency > max_latency_ratio * float_latency:
        failures.append(f"slower than float: {latency:.1f} ms vs {float_latency:.1f} ms per batch "
                        f"(> eval.max_variant_latency_ratio {max_latency_ratio:g})")
    if failures:
        return False, "not fit to serve: " + "; ".join(failures)
    return True, (f"fit to serve: loss delta {delta:+.4f} <= {max_loss_delta:.4f}, {size:,} vs "
                  f"{float_size:,} bytes, {latency:.1f} vs {float_latency:.1f} ms per batch")


def recommend_all(variant_figures: dict, eval_config) -> dict[str, tuple[bool, str]]:
    """recommend() for every variant against variant_figures["float"], with the eval section's
    allowances (max_quantization_loss_delta, max_variant_size_ratio, max_variant_latency_ratio)."""
    return {name: recommend(figures, variant_figures["float"], eval_config.max_quantization_loss_delta,
                            eval_config.max_variant_size_ratio, eval_config.max_variant_latency_ratio)
            for name, figures in variant_figures.items()}


def check_ids(ids, vocab_size: int, context_length: int) -> np.ndarray:
    """The SavedModel's token_logits checks, for the TFLite flatbuffer (TFLite has no Assert op:
    the converter drops the graph's checks, so id -1 would give finite logits and more positions
    than the context `RuntimeError: gather index out of bounds`)."""
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"input_ids must be [batch, positions], got shape {ids.shape}")
    if ids.shape[1] > context_length:
        raise ValueError(f"input_ids: at most {context_length} positions, got {ids.shape[1]}")
    if ids.size and ids.min() < 0:
        raise ValueError("input_ids must be >= 0")
    if ids.size and ids.max() >= vocab_size:
        raise ValueError(f"input_ids must be < {vocab_size}")
    return ids.astype(np.int32)


def logits_fn(model_dir: str, entry: dict, load=None):
    """ids int32 (B, T) -> logits float32 (B, T, V) for one variant: the SavedModel's
    token_logits signature (loaded by `load`, path -> loaded, when the caller shares its loads),
    or the TFLite Interpreter's."""
    path = os.path.join(model_dir, entry["path"])
    if entry["format"] == "saved_model":
        import tensorflow_text  # noqa: F401  registers the SentencePiece ops a model may embed
        loaded = (load or tf.saved_model.load)(path)   # must outlive the signature (it owns the variables)

        def saved_model_logits(ids):
            return loaded.signatures["token_logits"](input_ids=tf.convert_to_tensor(ids, tf.int32))["logits"]
        return saved_model_logits
    # The model's bytes through fs (TFLite opens model_path with the C library: no s3://).
    interpreter = tf.lite.Interpreter(model_content=fs.read_bytes(path), num_threads=os.cpu_count())
    runner = interpreter.get_signature_runner("token_logits")
    vocab_size = runner.get_output_details()["logits"]["shape"][-1]
    context_length = float_model_info(model_dir)["context_length"]
    return lambda ids: runner(input_ids=check_ids(ids, vocab_size, context_length))["logits"]


def float_model_info(model_dir: str) -> dict:
    """The float SavedModel's assets.extra/bigtrain_model.json (context_length, vocab_size, ...):
    always exported, it describes the TFLite flatbuffer converted from it too."""
    return json.loads(fs.read_text(fs.join(model_dir, DIRS["float"], MODEL_INFO)))
