"""Calling the exported SavedModel's signatures: the sample inputs of each, running one on a loaded
model, generate and sample requests."""

import numpy as np
import tensorflow as tf

from components.tokenizer.byte_level import BOS_ID, PAD_ID


PROMPTS = np.array([b"def main(", b"import os\n", b""], dtype=object)


# One set of inputs per signature, shaped as a batch of 3 rows.
INPUTS = {
    "serving_default": {"prompt": PROMPTS},
    "generate": {"prompt": PROMPTS, "max_new_tokens": np.array([5, 7, 0], np.int32)},
    "sample": {"prompt": PROMPTS, "max_new_tokens": np.array([6, 6, 6], np.int32),
               "temperature": np.array([0.8, 0.8, 0.8], np.float32), "top_k": np.array([0, 5, 0], np.int32),
               "top_p": np.array([1.0, 1.0, 0.9], np.float32), "seed": np.array([1, 2, 3], np.int32),
               "stop": np.array([b"\n", b"zz\x1f(", b""], object)},
    "score": {"prompt": PROMPTS, "continuation": np.array([b"x)", b"", b"abc"], object)},
    "token_logits": {"input_ids": np.array([[BOS_ID, 100, 101, 40], [BOS_ID, 1, 2, 3],
                                            [BOS_ID, 255, 0, PAD_ID]], np.int32)},
}


def run_loaded(loaded, name, inputs):
    out = loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}


def generate(loaded, prompts, max_new_tokens):
    """The generate signature with one max_new_tokens per prompt (the batching-safe shape)."""
    return loaded.signatures["generate"](prompt=tf.constant(prompts),
                                         max_new_tokens=tf.fill([len(prompts)], max_new_tokens))


def sample_request(prompts, max_new_tokens, temperature, seed, top_k=0, top_p=1.0, stop=()):
    """sample's inputs, one value per prompt; stop: the same stop strings for every row (joined by
    U+001F into the row's one `stop` string)."""
    rows = len(prompts)
    per_row = lambda v, dtype: np.broadcast_to(np.asarray(v, dtype), [rows]).copy()
    return {"prompt": np.array(prompts, object), "max_new_tokens": per_row(max_new_tokens, np.int32),
            "temperature": per_row(temperature, np.float32), "seed": per_row(seed, np.int32),
            "top_k": per_row(top_k, np.int32), "top_p": per_row(top_p, np.float32),
            "stop": np.array([b"\x1f".join(stop)] * rows, object)}


def sample(loaded, *args, **kwargs):
    request = sample_request(*args, **kwargs)
    return loaded.signatures["sample"](**{k: tf.constant(v) for k, v in request.items()})
