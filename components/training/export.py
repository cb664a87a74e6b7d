"""Export: a self-contained SavedModel. Byte tokenization and decoding live in the graph, so
serving (TF Serving, or tf.saved_model.load in any Python) needs no code of ours, no Keras custom
objects and no pickles.

Signatures:
  serving_default(prompts: string[B])                -> logits float32[B, vocab], prompt_tokens int32[B]
  generate(prompt: string[], max_new_tokens: int32[]) -> text: string[] (greedy continuation)
  sample(prompt, max_new_tokens, temperature: float32[], seed: int32[]) -> text (sampled, reproducible per seed)
  token_logits(input_ids: int32[B, T])               -> logits float32[B, T, vocab] (evaluation)
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from components.model.gpt import build_model
from components.text_example_gen.tokenizer import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE


class LanguageModelServer(tf.Module):
    def __init__(self, model, context_length: int):
        super().__init__(name="bigtrain_lm")
        self.model = model
        self.context_length = context_length
        self.byte_strings = tf.constant([bytes([i]) for i in range(256)])

    def _encode(self, prompts):
        """string[B] -> ragged int32[B, None]: [BOS] + UTF-8 bytes of each prompt."""
        chars = tf.strings.bytes_split(prompts)
        ids = tf.ragged.map_flat_values(
            lambda c: tf.cast(tf.reshape(tf.io.decode_raw(c, tf.uint8), [-1]), tf.int32), chars)
        bos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(prompts)[0], 1], BOS_ID))
        return tf.concat([bos, ids], axis=1)

    def _last_window(self, ids):
        """ragged [B, None] -> (int32[B, T] right-padded last T ids, int32[B] lengths <= T)."""
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        dense = ids.to_tensor(default_value=PAD_ID)                   # (B, Lmax)
        start = tf.maximum(lengths - self.context_length, 0)
        index = start[:, None] + tf.range(self.context_length)[None]  # (B, T)
        valid = index < lengths[:, None]
        gathered = tf.gather(dense, tf.minimum(index, tf.shape(dense)[1] - 1), batch_dims=1)
        return tf.where(valid, gathered, PAD_ID), tf.minimum(lengths, self.context_length)

    def _next_logits(self, window, lengths):
        # Causal attention: right padding cannot change the logits at position length - 1.
        logits = self.model(window, training=False)                   # (B, T, V)
        return tf.cast(tf.gather(logits, lengths - 1, batch_dims=1), tf.float32)  # (B, V)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="input_ids")])
    def token_logits(self, input_ids):
        """Already tokenized ids (B, T <= context) -> logits (B, T, vocab): what the Evaluator
        measures, through the same graph and weights that serving uses."""
        return {"logits": tf.cast(self.model(input_ids, training=False), tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="prompts")])
    def serving_default(self, prompts):
        window, lengths = self._last_window(self._encode(prompts))
        return {"logits": self._next_logits(window, lengths), "prompt_tokens": lengths}

    def _decode_loop(self, prompt, max_new_tokens, choose):
        ids = self._encode(prompt[None])[0]                           # (L,)
        new = tf.zeros([0], tf.int32)

        def body(i, ids, new, done):
            window, lengths = self._last_window(tf.RaggedTensor.from_tensor(ids[None]))
            token = choose(self._next_logits(window, lengths)[0], i)  # scalar int32
            done = tf.equal(token, EOS_ID)
            keep = tf.logical_not(done)
            ids = tf.concat([ids, tf.reshape(token, [1])], 0)
            new = tf.cond(keep, lambda: tf.concat([new, tf.reshape(token, [1])], 0), lambda: new)
            return i + 1, ids, new, done

        _, _, new, _ = tf.while_loop(
            lambda i, ids, new, done: tf.logical_and(i < max_new_tokens, tf.logical_not(done)),
            body, [tf.constant(0), ids, new, tf.constant(False)],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None]), tf.TensorShape([None]),
                              tf.TensorShape([])])
        byte_ids = tf.boolean_mask(new, new < 256)                    # drop specials
        return tf.strings.reduce_join(tf.gather(self.byte_strings, byte_ids))

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="prompt"),
                                  tf.TensorSpec([], tf.int32, name="max_new_tokens")])
    def generate(self, prompt, max_new_tokens):
        def choose(logits, i):  # greedy; PAD is never a sensible continuation
            logits = tf.tensor_scatter_nd_update(logits, [[PAD_ID]], [-1e9])
            return tf.argmax(logits, output_type=tf.int32)
        return {"text": self._decode_loop(prompt, max_new_tokens, choose)}

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="prompt"),
                                  tf.TensorSpec([], tf.int32, name="max_new_tokens"),
                                  tf.TensorSpec([], tf.float32, name="temperature"),
                                  tf.TensorSpec([], tf.int32, name="seed")])
    def sample(self, prompt, max_new_tokens, temperature, seed):
        def choose(logits, i):
            # PAD is never a sensible continuation: mask it out before sampling.
            logits = tf.tensor_scatter_nd_update(logits, [[PAD_ID]], [-1e9])
            scaled = logits / tf.maximum(temperature, 1e-4)
            return tf.cast(tf.random.stateless_categorical(
                scaled[None], 1, seed=tf.stack([seed, i]))[0, 0], tf.int32)
        return {"text": self._decode_loop(prompt, max_new_tokens, choose)}


def export_saved_model(trained_model, model_config, context_length: int, export_dir: str,
                       metadata: dict | None = None) -> str:
    """Copy the trained weights into a float32, single-device model and save it with signatures."""
    serving_model = build_model(model_config, context_length, "float32")
    serving_model.set_weights(trained_model.get_weights())
    server = LanguageModelServer(serving_model, context_length)
    signatures = {
        "serving_default": server.serving_default.get_concrete_function(),
        "generate": server.generate.get_concrete_function(),
        "sample": server.sample.get_concrete_function(),
        "token_logits": server.token_logits.get_concrete_function(),
    }
    tf.saved_model.save(server, export_dir, signatures=signatures)
    extra = os.path.join(export_dir, "assets.extra")
    tf.io.gfile.makedirs(extra)
    with tf.io.gfile.GFile(os.path.join(extra, "bigtrain_model.json"), "w") as fh:
        json.dump(dict(metadata or {}, context_length=context_length, vocab_size=VOCAB_SIZE,
                       tokenizer="utf-8 bytes 0-255, pad 256, bos 257, eos 258"), fh, indent=2)
    return export_dir
