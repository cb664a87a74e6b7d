"""A model's named weights on disk: a TF checkpoint keyed by each variable's object-graph path
(`model/blocks/0/attn/qkv/_kernel`), the names TensorFlow itself writes. Written beside the
serving SavedModel at export (`<model uri>/Format-Weights/weights`); warm starts read it back
(components/training/warm_start.py), matching variables by these paths.
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

FORMAT_WEIGHTS = "Format-Weights"
WEIGHTS_PREFIX = os.path.join(FORMAT_WEIGHTS, "weights")
ROOT = "model"
SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def variable_paths(model: keras.Model) -> dict[str, keras.Variable]:
    """Object-graph path -> variable: the names tf.saved_model.save gives them. Walked as a
    checkpoint sees the object graph, which names every variable the same (GPT adds its blocks
    there) without the SavedModel view's cost: that one reads every attribute of every object,
    and Keras' `_default_save_signature` traces the whole model on each read (0.6-1.0 CPU-s a
    walk of the tiny preset against 2 ms, 2026-11-29; test_weights_walk_names_what_saved_model_names)."""
    out: dict[str, keras.Variable] = {}
    seen: set[int] = set()

    def walk(obj, prefix):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, (keras.Variable, tf.Variable)):
            out[prefix] = obj
            return
        for name, child in tf.train.TrackableView.children(obj, save_type="checkpoint").items():
            walk(child, f"{prefix}/{name}")

    walk(model, ROOT)
    return out


def save_weights(model: keras.Model, prefix: str) -> str:
    """A TF checkpoint of the model's weights keyed by their object-graph paths (as
    `variable_paths` names them), for warm starts. Written by hand because neither serving
    format keeps the names: ExportArchive stores `_all_variables/<n>`, and tf.train.Checkpoint
    (model=...) does not see Keras 3's list of blocks."""
    root = tf.Module()
    for path, variable in variable_paths(model).items():
        node = root
        *parents, leaf = path.split("/")[1:]          # drop ROOT: the checkpoint adds it back
        for name in parents:
            if not hasattr(node, name):
                setattr(node, name, tf.Module())
            node = getattr(node, name)
        setattr(node, leaf, variable)
    return tf.train.Checkpoint(**{ROOT: root}).write(prefix)


def checkpoint_shapes(prefix: str) -> dict[str, list[int]]:
    """Object-graph path -> shape of every model variable a named-weights checkpoint holds."""
    reader = tf.train.load_checkpoint(prefix)
    return {key[:-len(SUFFIX)]: shape for key, shape in reader.get_variable_to_shape_map().items()
            if key.startswith(ROOT + "/") and key.endswith(SUFFIX)}


def assign_weights(model: keras.Model, prefix: str) -> int:
    """Every variable of `model` from the named-weights checkpoint at `prefix`, by path (the
    caller has checked that names and shapes match: warm_start.load_weights names a difference).
    Returns the number of variables assigned."""
    reader = tf.train.load_checkpoint(prefix)
    targets = variable_paths(model)
    for path, variable in targets.items():
        variable.assign(tf.cast(reader.get_tensor(path + SUFFIX), variable.dtype))
    return len(targets)
