"""Checks of a request's inputs inside the graph: bad input is an InvalidArgument error naming
the input (and the setting that bounds it), never a crash or a silently clipped value."""

from __future__ import annotations

import tensorflow as tf


def per_row(value, batch, name: str):
    """One value per prompt: [B] with B = the number of prompts."""
    fits = tf.debugging.assert_equal(tf.size(value), batch,
                                     message=f"{name} must have one value per prompt")
    with tf.control_dependencies([fits]):
        return tf.identity(value)


def checked(value, condition, message: str):
    """value, once every element of condition holds (else InvalidArgument: message)."""
    with tf.control_dependencies([tf.debugging.Assert(tf.reduce_all(condition), [message])]):
        return tf.identity(value)


def checked_max_new_tokens(max_new_tokens, batch, limit: int):
    max_new_tokens = per_row(max_new_tokens, batch, "max_new_tokens")
    checks = [tf.debugging.assert_non_negative(max_new_tokens, message="max_new_tokens must be >= 0"),
              tf.debugging.assert_less_equal(
                  max_new_tokens, limit,
                  message=f"max_new_tokens must be <= {limit} (export.max_new_tokens)")]
    with tf.control_dependencies(checks):
        return tf.identity(max_new_tokens)


def sampling_inputs(batch, temperature, top_k, top_p, seed):
    """The sample signature's per-row controls, checked; a negative seed becomes a random one
    (signatures have no optional inputs: -1 spells "no seed")."""
    temperature = per_row(temperature, batch, "temperature")
    temperature = tf.debugging.assert_all_finite(temperature, message="temperature must be finite")
    temperature = checked(temperature, temperature >= 0, "temperature must be >= 0 (0 = greedy)")
    top_k = checked(per_row(top_k, batch, "top_k"), top_k >= 0, "top_k must be >= 0 (0 = off)")
    top_p = per_row(top_p, batch, "top_p")
    top_p = checked(top_p, (top_p > 0) & (top_p <= 1), "top_p must be > 0 and <= 1")
    seed = per_row(seed, batch, "seed")
    seed = tf.where(seed < 0, tf.random.uniform([batch], 0, 2**31 - 1, tf.int32), seed)
    return temperature, top_k, top_p, seed
