"""Warm start (fine-tuning): a parent model's weights into a freshly built model, then optional
freezing. Sources are TF checkpoints only: a Model artifact's named weights (Format-Weights/weights, written
by components/model/weights.py at export), the variables of a SavedModel saved with the model under `model`
(bigtrain's exports before ExportArchive), or a tf.train checkpoint whose root holds the model as
`model`. Never pickles, HDF5 or .keras files. (The serving SavedModel itself, written through
Keras' ExportArchive, stores its variables unnamed as `_all_variables/<n>`: no use for matching.)

A Hugging Face directory (`train.init_from=hf:DIR`, a class components/serving/hf/mapping.py
maps) is checked before the model is built (components/training/hf_source.py, TF-free: at plan
time from the config, and in the Trainer with the data's tokenizer) and then loaded by the same
mapping backwards (`load_hf`).

Variables are matched by their path in the object graph (`model/blocks/0/attn/qkv/_kernel`),
the names TensorFlow itself writes, so a different depth or width is an error naming the first
variable that differs, not a silent partial load.
"""

from __future__ import annotations

import math
import os

import keras
import tensorflow as tf

from components.model import properties as model_props
from components.model.weights import (ROOT, WEIGHTS_PREFIX, assign_weights, checkpoint_shapes,
                                       variable_paths)
from components.serving.variants import DIRS
from components.training.hf_source import HF_PREFIX, check_hf_source, hf_source  # noqa: F401

FORMAT_SERVING = DIRS["float"]
REFUSED_SUFFIXES = (".h5", ".hdf5", ".keras", ".pkl", ".pickle", ".npz")


class WarmStartError(ValueError):
    """The warm-start source is missing, unreadable or does not fit the model (names which)."""


class ArchitectureMismatch(WarmStartError):
    """The parent was built with another model.arch than this config's (names both)."""


def checkpoint_arch(paths) -> str | None:
    """The model.arch a checkpoint's variable paths were written by: gpt2 has a position table,
    llama an RMSNorm (`scale`) as its final norm; None when neither is there."""
    if any(p.startswith(f"{ROOT}/position_embedding/") for p in paths):
        return "gpt2"
    if f"{ROOT}/ln_f/scale" in paths:
        return "llama"
    return None


def hf_directory(init_from: str, base_model: str | None) -> str | None:
    """The HF directory to read for `train.init_from=hf:DIR`: the path the pipeline imported
    (base_model: <DIR>/Format-Serving, TFX's serving path of the imported artifact; absolute,
    the one whose digest lineage holds), else DIR as written; None for other sources."""
    written = hf_source(init_from)
    if written is None or not base_model:
        return written
    path = base_model.rstrip("/")
    return os.path.dirname(path) if os.path.basename(path) == FORMAT_SERVING else path


def resolve_source(init_from: str, base_model: str | None) -> str | None:
    """train.init_from plus the Trainer's base_model input -> a checkpoint prefix (or None).

    base_model is TFX's path for the resolved/imported Model artifact (<uri>/Format-Serving)."""
    if init_from == "none":
        return None
    if hf_source(init_from) is not None:
        return HF_PREFIX + hf_directory(init_from, base_model)
    if init_from == "latest_blessed" and not base_model:
        raise WarmStartError("train.init_from=latest_blessed: no blessed model in this metadata "
                             "store yet (run once without init_from; a model the Evaluator "
                             "blesses becomes the parent)")
    path = base_model or init_from
    if not tf.io.gfile.exists(path) and os.path.basename(path.rstrip("/")) == FORMAT_SERVING:
        path = os.path.dirname(path.rstrip("/"))  # an imported path that is not a Model artifact
    return checkpoint_prefix(path)


def checkpoint_prefix(path: str) -> str:
    if path.lower().endswith(REFUSED_SUFFIXES):
        raise WarmStartError(f"train.init_from: {path}: pickles, HDF5 and .keras files are not "
                             "loaded; give a Model artifact, a SavedModel or a TF checkpoint")
    if os.path.basename(path.rstrip("/")) == FORMAT_SERVING:    # a Model artifact's SavedModel
        path = os.path.dirname(path.rstrip("/"))
    for candidate in (os.path.join(path, WEIGHTS_PREFIX),
                      os.path.join(path, FORMAT_SERVING, "variables", "variables"),
                      os.path.join(path, "variables", "variables")):
        if tf.io.gfile.exists(candidate + ".index"):
            return candidate
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
    if tf.io.gfile.exists(path + ".index"):
        return path
    raise WarmStartError(f"train.init_from: {path} is not a Model artifact, a SavedModel or a TF "
                         "checkpoint (no variables index found)")


def load_weights(model: keras.Model, prefix: str) -> int:
    """Assign every model variable from the checkpoint; returns the number of values loaded.
    Raises WarmStartError naming a missing, surplus or differently shaped variable."""
    reader = tf.train.load_checkpoint(prefix)
    shapes = checkpoint_shapes(prefix)
    targets = variable_paths(model)
    parent, own = checkpoint_arch(shapes), getattr(model, "arch", None)
    if parent and own and parent != own:
        raise ArchitectureMismatch(
            f"warm start from {prefix}: the parent is a model.arch={parent} model but this config "
            f"builds model.arch={own}; weights do not carry across architectures (set "
            f"model.arch={parent} to fine-tune this parent, or train.init_from=none)")
    for path, variable in targets.items():
        if path not in shapes:
            # A training checkpoint's flat keys name each variable by its shortest path, which
            # for trainable weights runs through the optimizer (the object graph has both).
            hint = (" A training checkpoint keys trainable weights under the optimizer; start "
                    "from the Model artifact or its SavedModel instead."
                    if any(k.startswith("optimizer/") for k in reader.get_variable_to_shape_map())
                    else " Was the parent built with the same model.n_layer and model.tie_embeddings?")
            raise WarmStartError(f"warm start from {prefix}: the checkpoint has no variable {path} "
                                 f"(shape {list(variable.shape)}).{hint}")
        if list(shapes[path]) != list(variable.shape):
            raise WarmStartError(f"warm start from {prefix}: variable {path} has shape "
                                 f"{list(shapes[path])} in the checkpoint but {list(variable.shape)} "
                                 "in this model (model.* and data.seq_len must match the parent)")
    surplus = sorted(set(shapes) - set(targets))
    if surplus:
        raise WarmStartError(f"warm start from {prefix}: this model has no variable {surplus[0]} "
                             f"({len(surplus)} checkpoint variable(s) unused; the parent is deeper "
                             "or has an untied head)")
    return assign_weights(model, prefix)


def freeze(model: keras.Model, items) -> int:
    """train.freeze: `embeddings` and/or `blocks:N` made non-trainable (before the optimizer is
    built, so the train step never updates them). Returns the number of frozen parameters."""
    for item in items:
        if item == "embeddings":
            model.token_embedding.trainable = False
            if model.position_embedding is not None:       # gpt2 only (llama: rotary)
                model.position_embedding.trainable = False
        elif item.startswith("blocks:"):
            for block in model.blocks[:int(item.split(":", 1)[1])]:
                block.trainable = False
        else:
            raise WarmStartError(f"train.freeze: unknown item {item!r}")
    return int(sum(math.prod(v.shape) for v in model.non_trainable_weights))


def preparer(prefix: str | None, freeze_items, report: dict):
    """The hook loop.train calls on the freshly built model (inside the strategy scope, before
    the optimizer is built and before a resume checkpoint, which wins, is restored). prefix: a
    checkpoint prefix, or `hf:DIR` (checked beforehand by check_hf_source)."""
    def prepare(model):
        if prefix and hf_source(prefix) is not None:
            report[model_props.WARM_START_VARIABLES] = load_hf(model, hf_source(prefix))
            report[model_props.INIT_FROM_CHECKPOINT] = prefix
        elif prefix:
            report[model_props.WARM_START_VARIABLES] = load_weights(model, prefix)
            report[model_props.INIT_FROM_CHECKPOINT] = prefix
        report[model_props.FROZEN_PARAMETERS] = freeze(model, freeze_items)
    return prepare


def load_hf(model: keras.Model, hf_dir: str) -> int:
    """Every variable from the HF directory's tensors (names and shapes checked first)."""
    from components.serving.hf import directory, mapping
    return mapping.assign_hf_tensors(model, directory.read_tensors(hf_dir), hf_dir)
