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
    """Object-graph path -> variable, walked the way tf.saved_model.save walks it."""
    out: dict[str, keras.Variable] = {}
    seen: set[int] = set()

    def walk(obj, prefix):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, (keras.Variable, tf.Variable)):
            out[prefix] = obj
            return
        for name, child in tf.train.TrackableView.children(obj, save_type="savedmodel").items():
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
