"""Export: a self-contained SavedModel that TF Serving, KServe and `saved_model_cli run` load.

Written as keras.export.ExportArchive writes it (write_archive): a Keras 3 model held by a plain
tf.Module and saved with tf.saved_model.save restores in TF2's tf.saved_model.load but not in the
TF1 session loader that model servers use ("Could not find variable ..."). Tokenization and decoding live in the
graph: serving needs no code of ours, no Keras custom objects, no pickles.

Signatures. B = batch: every input has dimension 0 = B (one value per prompt), so TF Serving's
request batching (--enable_batching) can concatenate requests; the prompt input is `prompt`
everywhere. docs/serving.md holds the request bodies (tests/export/test_serving_docs.py runs them).
  serving_default(prompt string[B])    -> logits float32[B, V] (next token), prompt_tokens int32[B]
  generate(prompt, max_new_tokens int32[B])
                                        -> text string[B], text_bytes string[B], new_tokens int32[B]
  sample(prompt, max_new_tokens, temperature float32[B], top_k int32[B], top_p float32[B],
         seed int32[B], stop string[B])  -> text, text_bytes, new_tokens
  score(prompt string[B], continuation string[B]) -> log_prob float32[B], tokens int32[B]
  token_logits(input_ids int32[B, T<=context])    -> logits float32[B, T, V] (evaluation)

Text outputs: `text_bytes` is the decoded bytes as generated (TF Serving's REST base64-encodes
outputs whose name ends in `_bytes`); `text` is the same bytes made valid UTF-8 by
tf.strings.unicode_transcode(errors="replace"): each invalid byte sequence becomes U+FFFD, so
the REST response is always valid JSON text.

Sampling: PAD and BOS are never chosen (set to -inf, see decoding.ban); temperature 0 = greedy;
top_k 0 = off; top_p in (0, 1]; a negative seed = a random seed for the row (signatures have no
optional inputs: -1 spells "no seed"), else the row's own stateless
stream (a row's text depends on its prompt and seed only, not on its batch); a row ends after the
token that completes any of its `stop` strings (the text ends with the stop string). `stop` is one
string per row: the row's stop strings joined by U+001F, "" = none (components/serving/stops.py).

The graph functions are components/serving/server.py's. Context rule, cached and uncached
alike: the model sees the last `context` ids of the prompt (the prompt is cut before it is
densified; byte prompts are cut to their last `context` bytes before they are split). Past the
window: gpt2 cuts a full row to its last `context // 2` ids (positions restart at 0; only that
row's cache is re-filled); a rotary model (llama) slides the row's cache one slot per token with
positions counting on (sliding-window attention over the whole sequence). Cost bound: the batch decodes until every row has
ended (EOS, stop, or its own max_new_tokens): the request returns when its longest row ends.
Bad input is an InvalidArgument error naming the input.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf
# TF-internal, pinned by the lock (TF 2.16): the save context write_archive traces in.
from tensorflow.python.saved_model import save_context

from components.model.gpt import build_model
from components.serving import warmup
from components.serving.assets import extra_file
from components.serving.server import DEFAULT_MAX_NEW_TOKENS_LIMIT, LanguageModelServer

SIGNATURES = ("serving_default", "generate", "sample", "score", "token_logits")
MODEL_INFO = extra_file("bigtrain_model.json")
# How a byte model names its tokenizer in MODEL_INFO: kept as exported so far, because the
# Evaluator compares it with the baseline's (same_vocabulary) to decide whether it can compare.
BYTE_TOKENIZER_INFO = "utf-8 bytes 0-255, pad 256, bos 257, eos 258"


def input_signatures() -> dict:
    """Every input has dimension 0 = batch (TF Serving's batcher concatenates along it)."""
    def row(dtype, name, shape=(None,)):
        return tf.TensorSpec(list(shape), dtype, name=name)
    prompt = row(tf.string, "prompt")
    return {
        "serving_default": [prompt],
        "generate": [prompt, row(tf.int32, "max_new_tokens")],
        "sample": [prompt, row(tf.int32, "max_new_tokens"), row(tf.float32, "temperature"),
                   row(tf.int32, "top_k"), row(tf.float32, "top_p"), row(tf.int32, "seed"),
                   row(tf.string, "stop")],
        "score": [prompt, row(tf.string, "continuation")],
        "token_logits": [row(tf.int32, "input_ids", (None, None))],
    }


def write_serving_model(model, context_length: int, export_dir: str, *, tokenizer,
                        max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT,
                        signatures=SIGNATURES, metadata: dict | None = None) -> str:
    """Write `model` (a built Keras GPT, float or quantized) with the signatures (write_archive),
    plus MODEL_INFO and the warm-up requests TF Serving replays at load
    (assets.extra/tf_serving_warmup_requests). tokenizer: the Tokenizer the model was trained
    with; a SentencePiece model is embedded in the graph."""
    server = LanguageModelServer(model, context_length, max_new_tokens_limit, tokenizer=tokenizer)
    functions, specs = signature_functions(server), input_signatures()
    endpoints = {name: tf.function(functions[name], input_signature=specs[name], autograph=False)
                 for name in signatures}
    # Its SentencePiece resource (if any) must be saved and restored with the graph.
    tracked = () if server.graph_tokenizer is None else (server.graph_tokenizer,)
    write_archive(export_dir, endpoints, tracked=tracked)
    write_model_info(export_dir, dict(
        metadata or {}, context_length=context_length, vocab_size=server.vocab_size,
        max_new_tokens_limit=max_new_tokens_limit, signatures=list(signatures),
        tokenizer=BYTE_TOKENIZER_INFO if tokenizer.kind == "bytes" else tokenizer.describe()))
    warmup.write_warmup_requests(export_dir, signatures, context_length)
    return export_dir


def write_archive(export_dir: str, endpoints: dict, tracked: tuple = ()) -> None:
    """What keras.export.ExportArchive writes (the same object graph: each endpoint an attribute
    and a signature, the variables its functions use as `_all_variables`, the tracked objects'
    resources as `_misc_assets`), with each endpoint traced once instead of twice.

    Written here because ExportArchive.write_out lists the variables by tracing every endpoint
    outside a save context, and tf.saved_model.save then traces each again inside its own: TF's
    function cache keys a trace on the save options' variable policy. Tracing inside one save
    context with the options the save uses makes the save's lookups hit. The Keras model itself is
    not tracked: the endpoints' own tf.Variables are what the session loader restores; the Keras
    variable wrappers as well would store every weight twice (test_weights_are_stored_once)."""
    # A served model is never differentiated: without the custom gradients (Keras' int8 matmuls,
    # the model's own) the tiny int8 export holds 36 functions instead of 126 and takes 4.7 s
    # instead of 6.4-7.7 (2026-11-28, the Intel 2-core VM).
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    with save_context.save_context(options):
        concrete = [fn.get_concrete_function() for fn in endpoints.values()]
    root = tf.__internal__.tracking.AutoTrackable()
    root.variables, root.trainable_variables, root.non_trainable_variables = [], [], []
    root._all_variables = _variables_used(concrete)
    root._misc_assets = [t for obj in tracked for t in tf.train.TrackableView(obj).descendants()
                         if isinstance(t, tf.saved_model.experimental.TrackableResource)]
    for name, fn in endpoints.items():
        setattr(root, name, fn)
    signatures = dict(endpoints)
    signatures.setdefault("serving_default", next(iter(endpoints.values())))   # TF Serving's default
    tf.saved_model.save(root, export_dir, signatures=signatures, options=options)


def _variables_used(concrete_functions) -> list:
    """The tf.Variables the functions capture, each once: trainable ones first (as Keras lists them)."""
    seen, ordered = set(), []
    for group in ("trainable_variables", "variables"):
        for fn in concrete_functions:
            for variable in getattr(fn, group):
                if id(variable) not in seen:
                    seen.add(id(variable))
                    ordered.append(variable)
    return ordered


def signature_functions(server: LanguageModelServer) -> dict:
    """Each signature's function. Named arguments: the signature's input keys are the
    function's argument names."""
    return {
        "serving_default": lambda prompt: server.serving_default(prompt),
        "generate": lambda prompt, max_new_tokens: server.generate(prompt, max_new_tokens),
        "sample": lambda prompt, max_new_tokens, temperature, top_k, top_p, seed, stop: server.sample(
            prompt, max_new_tokens, temperature, top_k, top_p, seed, stop),
        "score": lambda prompt, continuation: server.score(prompt, continuation),
        "token_logits": lambda input_ids: server.token_logits(input_ids),
    }


def write_model_info(export_dir: str, info: dict) -> str:
    path = os.path.join(export_dir, MODEL_INFO)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as fh:
        json.dump(info, fh, indent=2)
    return path


def serving_copy(trained_model, model_config, context_length: int):
    """The trained weights in a float32, single-device model (what every variant starts from)."""
    serving_model = build_model(model_config, context_length, "float32",
                                vocab_size=trained_model.vocab_size)
    serving_model.set_weights(trained_model.get_weights())
    return serving_model


def export_saved_model(trained_model, model_config, context_length: int, export_dir: str, *,
                       tokenizer, metadata: dict | None = None,
                       max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT) -> str:
    """Copy the trained weights into a float32, single-device model and write it with signatures."""
    return write_serving_model(serving_copy(trained_model, model_config, context_length),
                               context_length, export_dir, tokenizer=tokenizer, metadata=metadata,
                               max_new_tokens_limit=max_new_tokens_limit)
