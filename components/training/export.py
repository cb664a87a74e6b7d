"""Export: a self-contained SavedModel that TF Serving, KServe and `saved_model_cli run` load.

Written through keras.export.ExportArchive: a Keras 3 model held by a plain tf.Module and saved
with tf.saved_model.save restores in TF2's tf.saved_model.load but not in the TF1 session loader
that model servers use ("Could not find variable ..."). Byte tokenization and
decoding live in the graph: serving needs no code of ours, no Keras custom objects, no pickles.

Signatures (B = batch; per-example inputs take a scalar, applied to every row, or one value per
row, so both TF Serving REST bodies work: row format builds [B] tensors, columnar may send scalars):
  serving_default(prompts: string[B])   -> logits float32[B, V] (next token), prompt_tokens int32[B]
  generate(prompt: string[B], max_new_tokens: int32 [] | [B])
                                        -> text string[B] (greedy), new_tokens int32[B]
  sample(prompt, max_new_tokens, temperature: float32 [] | [B], seed: int32 [] | [B])
                                        -> text, new_tokens (temperature 0 = greedy)
  token_logits(input_ids: int32[B, T<=context])  -> logits float32[B, T, V] (evaluation)

Decoding keeps a per-layer key/value cache (components/model/decoding.py). Context rule, cached and
uncached alike: the model sees the last `context` ids of the prompt; when a row's window is full,
it is cut to its last `context // 2` ids (positions restart at 0; the cache is re-filled from
them) and decoding continues. Bad input is an InvalidArgument error naming the input.
"""

from __future__ import annotations

import json
import os

import keras
import tensorflow as tf

from components.model import decoding
from components.model.gpt import build_model
from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

SIGNATURES = ("serving_default", "generate", "sample", "token_logits")
DEFAULT_MAX_NEW_TOKENS_LIMIT = 4096


class LanguageModelServer:
    """The graph functions behind the signatures, for one (float or quantized) Keras GPT."""

    def __init__(self, model, context_length: int, max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT,
                 tokenizer=None):
        """tokenizer: a components.tokenizer Tokenizer whose in-graph ops the signatures use
        (SentencePiece through tensorflow-text); None: UTF-8 bytes with stock TensorFlow ops."""
        self.model = model
        self.tokenizer = tokenizer
        self.graph_tokenizer = tokenizer.in_graph() if tokenizer is not None else None
        if tokenizer is not None:
            self.vocab_size, self.pad_id = tokenizer.vocab_size, tokenizer.pad_id
            self.bos_id, self.eos_id = tokenizer.bos_id, tokenizer.eos_id
        else:
            self.vocab_size, self.pad_id, self.bos_id, self.eos_id = VOCAB_SIZE, PAD_ID, BOS_ID, EOS_ID
        self.context_length = context_length
        self.keep = max(1, context_length // 2)   # ids kept when a full window slides
        self.max_new_tokens_limit = max_new_tokens_limit
        self.byte_strings = tf.constant([bytes([i]) for i in range(256)] + [b""] * (VOCAB_SIZE - 256))

    # -- tokenization and windows ---------------------------------------------------------------
    def _encode(self, prompts):
        """string[B] -> ragged int32[B, None]: [BOS] + the prompt's ids (UTF-8 bytes by default)."""
        if self.graph_tokenizer is not None:
            ids = tf.cast(self.graph_tokenizer.tokenize(prompts), tf.int32)
            bos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(prompts)[0], 1], self.bos_id))
            return tf.concat([bos, ids], axis=1)
        chars = tf.strings.bytes_split(prompts)
        ids = tf.ragged.map_flat_values(
            lambda c: tf.cast(tf.reshape(tf.io.decode_raw(c, tf.uint8), [-1]), tf.int32), chars)
        bos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(prompts)[0], 1], self.bos_id))
        return tf.concat([bos, ids], axis=1)

    def _last_window(self, ids):
        """ragged [B, None] -> (int32[B, T] right-padded last T ids, int32[B] lengths <= T)."""
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        dense = ids.to_tensor(default_value=self.pad_id)                   # (B, Lmax)
        start = tf.maximum(lengths - self.context_length, 0)
        index = start[:, None] + tf.range(self.context_length)[None]  # (B, T)
        valid = index < lengths[:, None]
        gathered = tf.gather(dense, tf.minimum(index, tf.shape(dense)[1] - 1), batch_dims=1)
        return tf.where(valid, gathered, self.pad_id), tf.minimum(lengths, self.context_length)

    def _next_logits(self, window, lengths):
        # Causal attention: right padding cannot change the logits at position length - 1.
        logits = self.model(window, training=False)                   # (B, T, V)
        return tf.cast(tf.gather(logits, lengths - 1, batch_dims=1), tf.float32)  # (B, V)

    # -- input checks: InvalidArgument naming the input, never a crash -----------------------------
    def _per_row(self, value, batch, name):
        """A scalar or one value per row -> [B]."""
        rank = tf.debugging.assert_less_equal(
            tf.rank(value), 1, message=f"{name} must be a scalar or a vector with one value per prompt")
        with tf.control_dependencies([rank]):
            size = tf.size(value)
            fits = tf.debugging.assert_equal(
                tf.logical_or(tf.equal(size, 1), tf.equal(size, batch)), True,
                message=f"{name} must be a scalar or have one value per prompt (as many as prompt)")
        with tf.control_dependencies([fits]):
            return tf.broadcast_to(tf.reshape(value, [-1]), [batch])

    def _checked_max_new_tokens(self, max_new_tokens, batch):
        max_new_tokens = self._per_row(max_new_tokens, batch, "max_new_tokens")
        checks = [tf.debugging.assert_non_negative(max_new_tokens, message="max_new_tokens must be >= 0"),
                  tf.debugging.assert_less_equal(
                      max_new_tokens, self.max_new_tokens_limit,
                      message=f"max_new_tokens must be <= {self.max_new_tokens_limit} (export.max_new_tokens)")]
        with tf.control_dependencies(checks):
            return tf.identity(max_new_tokens)

    # -- decoding -------------------------------------------------------------------------------
    def decode(self, prompts, max_new_tokens, choose, cached: bool = True):
        """prompts string[B], max_new_tokens int32[B], choose(logits (B, V), i) -> int32[B].
        Returns (text string[B], new_tokens int32[B]). Rows stop at EOS or their own limit."""
        batch, slots, keep = tf.shape(prompts)[0], self.context_length, self.keep
        window, lengths = self._last_window(self._encode(prompts))      # (B, T), (B,)
        if cached:
            logits, cache = decoding.prefill(self.model, window, lengths)
        else:
            logits, cache = self._next_logits(window, lengths), ()
        steps = tf.reduce_max(tf.concat([max_new_tokens, [0]], 0))
        shifted_pad = tf.fill([batch, slots - keep], self.pad_id)

        def body(i, window, lengths, cache, logits, done, out):
            token = choose(logits, i)                                   # (B,)
            active = tf.logical_and(tf.logical_not(done), i < max_new_tokens)
            out = out.write(i + 1, tf.where(active, token, self.pad_id))
            done = tf.logical_or(tf.logical_not(active), tf.equal(token, self.eos_id))
            # A full window slides: keep its last `keep` ids, positions restart at 0.
            full = lengths >= slots
            window = tf.where(full[:, None], tf.concat([window[:, slots - keep:], shifted_pad], 1), window)
            lengths = tf.where(full, keep, lengths)
            if cached:
                cache = tf.cond(tf.reduce_any(full),
                                lambda: decoding.merge(full, decoding.prefill(self.model, window, lengths)[1], cache),
                                lambda: cache)
            window = tf.where(tf.one_hot(lengths, slots, on_value=True, off_value=False),
                              token[:, None], window)
            if cached:
                logits, cache = decoding.step(self.model, token, lengths, cache)
            else:
                logits = self._next_logits(window, lengths + 1)
            return i + 1, window, lengths + 1, cache, logits, done, out

        def cond(i, window, lengths, cache, logits, done, out):
            return tf.logical_and(i < steps, tf.logical_not(tf.reduce_all(done)))

        # Row 0 is a PAD column: stacking an empty TensorArray (0 steps) is an error.
        out = tf.TensorArray(tf.int32, size=1, dynamic_size=True, element_shape=[None]).write(
            0, tf.fill([batch], self.pad_id))
        loop = tf.while_loop(cond, body, [tf.constant(0), window, lengths, cache, logits,
                                          tf.zeros([batch], tf.bool), out])
        new = tf.transpose(tf.reshape(loop[-1].stack(), [-1, batch]))   # (B, steps run)
        if self.graph_tokenizer is not None:
            # pad / bos / eos are dropped by detokenize and not counted as new tokens.
            text = self.graph_tokenizer.detokenize(tf.RaggedTensor.from_tensor(new))
            special = tf.logical_or(tf.equal(new, self.pad_id),
                                    tf.logical_or(tf.equal(new, self.bos_id), tf.equal(new, self.eos_id)))
            new_tokens = tf.reduce_sum(tf.cast(tf.logical_not(special), tf.int32), axis=1)
            return text, new_tokens
        text = tf.strings.reduce_join(tf.gather(self.byte_strings, new), axis=1)  # specials -> b""
        new_tokens = tf.reduce_sum(tf.cast(new < 256, tf.int32), axis=1)
        return text, new_tokens

    # -- signatures -----------------------------------------------------------------------------
    def token_logits(self, input_ids):
        """Already tokenized ids (B, T <= context) -> logits (B, T, vocab): what the Evaluator
        measures, through the same graph and weights that serving uses."""
        checks = [tf.debugging.assert_less_equal(tf.shape(input_ids)[1], self.context_length,
                                                 message=f"input_ids: at most {self.context_length} positions"),
                  tf.debugging.assert_non_negative(input_ids, message="input_ids must be >= 0"),
                  tf.debugging.assert_less(input_ids, self.vocab_size, message=f"input_ids must be < {self.vocab_size}")]
        with tf.control_dependencies(checks):
            return {"logits": tf.cast(self.model(input_ids, training=False), tf.float32)}

    def serving_default(self, prompts):
        window, lengths = self._last_window(self._encode(prompts))
        return {"logits": self._next_logits(window, lengths), "prompt_tokens": lengths}

    def _mask_pad(self, logits):  # PAD is never a sensible continuation
        return tf.where(tf.equal(tf.range(self.vocab_size), self.pad_id)[None], -1e9, logits)

    def generate(self, prompt, max_new_tokens, cached: bool = True):
        limit = self._checked_max_new_tokens(max_new_tokens, tf.shape(prompt)[0])

        def choose(logits, i):
            return tf.argmax(self._mask_pad(logits), axis=-1, output_type=tf.int32)
        text, new_tokens = self.decode(prompt, limit, choose, cached)
        return {"text": text, "new_tokens": new_tokens}

    def sample(self, prompt, max_new_tokens, temperature, seed, cached: bool = True):
        batch = tf.shape(prompt)[0]
        limit = self._checked_max_new_tokens(max_new_tokens, batch)
        temperature = self._per_row(temperature, batch, "temperature")
        seed = self._per_row(seed, batch, "seed")
        temperature = tf.debugging.assert_all_finite(temperature, message="temperature must be finite")
        with tf.control_dependencies([tf.debugging.assert_non_negative(
                temperature, message="temperature must be >= 0 (0 = greedy)")]):
            temperature = tf.identity(temperature)

        def choose(logits, i):
            logits = self._mask_pad(logits)
            greedy = tf.argmax(logits, axis=-1, output_type=tf.int32)
            # Gumbel-max with a per-row stateless stream (seed, step): a row's text depends on its
            # own prompt and seed only, not on the other requests TF Serving batched with it.
            uniform = tf.map_fn(
                lambda s: tf.random.stateless_uniform([self.vocab_size], seed=tf.stack([s, i]),
                                                      minval=1e-20, maxval=1.0),
                seed, fn_output_signature=tf.float32)                    # (B, V)
            gumbel = -tf.math.log(-tf.math.log(uniform))
            scaled = logits / tf.maximum(temperature, 1e-6)[:, None]
            sampled = tf.argmax(scaled + gumbel, axis=-1, output_type=tf.int32)
            return tf.where(temperature > 0, sampled, greedy)
        text, new_tokens = self.decode(prompt, limit, choose, cached)
        return {"text": text, "new_tokens": new_tokens}


def input_signatures(context_length: int) -> dict:
    per_row = lambda dtype, name: tf.TensorSpec(None, dtype, name=name)   # scalar or [B]
    return {
        "serving_default": [tf.TensorSpec([None], tf.string, name="prompts")],
        "generate": [tf.TensorSpec([None], tf.string, name="prompt"), per_row(tf.int32, "max_new_tokens")],
        "sample": [tf.TensorSpec([None], tf.string, name="prompt"), per_row(tf.int32, "max_new_tokens"),
                   per_row(tf.float32, "temperature"), per_row(tf.int32, "seed")],
        "token_logits": [tf.TensorSpec([None, None], tf.int32, name="input_ids")],
    }


def write_serving_model(model, context_length: int, export_dir: str, *,
                        max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT,
                        signatures=SIGNATURES, metadata: dict | None = None,
                        tokenizer=None) -> str:
    """Write `model` (a built Keras GPT, float or quantized) with the signatures through Keras'
    ExportArchive, plus assets.extra/bigtrain_model.json. tokenizer: the Tokenizer the model was
    trained with (None: UTF-8 bytes); a SentencePiece model is embedded in the graph."""
    server = LanguageModelServer(model, context_length, max_new_tokens_limit, tokenizer=tokenizer)
    specs = input_signatures(context_length)
    archive = keras.export.ExportArchive()
    if server.graph_tokenizer is not None:  # its SentencePiece resource must be saved and restored
        archive.track(server.graph_tokenizer)
    # No archive.track(model): the endpoints' own variables are what the session loader restores,
    # and tracking the model as well stores every weight twice (Keras' variable wrappers and the
    # tf.Variables under them are separate checkpoint entries: 2x on disk; test_weights_are_stored_once).
    # Named arguments: the signature's input keys are the function's argument names.
    functions = {
        "serving_default": lambda prompts: server.serving_default(prompts),
        "generate": lambda prompt, max_new_tokens: server.generate(prompt, max_new_tokens),
        "sample": lambda prompt, max_new_tokens, temperature, seed: server.sample(
            prompt, max_new_tokens, temperature, seed),
        "token_logits": lambda input_ids: server.token_logits(input_ids),
    }
    for name in signatures:
        archive.add_endpoint(name, functions[name], input_signature=specs[name])
    archive.write_out(export_dir, verbose=False)
    extra = os.path.join(export_dir, "assets.extra")
    tf.io.gfile.makedirs(extra)
    with tf.io.gfile.GFile(os.path.join(extra, "bigtrain_model.json"), "w") as fh:
        json.dump(dict(metadata or {}, context_length=context_length, vocab_size=server.vocab_size,
                       max_new_tokens_limit=max_new_tokens_limit, signatures=list(signatures),
                       tokenizer=(tokenizer.describe() if tokenizer is not None else
                                  "utf-8 bytes 0-255, pad 256, bos 257, eos 258")), fh, indent=2)
    return export_dir


def serving_copy(trained_model, model_config, context_length: int):
    """The trained weights in a float32, single-device model (what every variant starts from)."""
    serving_model = build_model(model_config, context_length, "float32",
                                vocab_size=trained_model.vocab_size)
    serving_model.set_weights(trained_model.get_weights())
    return serving_model


def export_saved_model(trained_model, model_config, context_length: int, export_dir: str,
                       metadata: dict | None = None,
                       max_new_tokens_limit: int = DEFAULT_MAX_NEW_TOKENS_LIMIT) -> str:
    """Copy the trained weights into a float32, single-device model and write it with signatures."""
    return write_serving_model(serving_copy(trained_model, model_config, context_length),
                               context_length, export_dir, metadata=metadata,
                               max_new_tokens_limit=max_new_tokens_limit)
