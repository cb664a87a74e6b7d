"""Training checkpoints hold every model variable by name (issue 20, item 4)."""

import pytest
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from components.training import loop, warm_start
from tests.training.conftest import GPT2, tiny_config



def model_paths_in_object_graph(prefix: str) -> set[str]:
    """Every variable reachable from the checkpoint's root by `model/...` edges of its object
    graph (the names a restore by path resolves; flat keys use the shortest path, which for
    trainable weights runs through the optimizer)."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(prefix).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    found, stack = set(), [(child.node_id, child.local_name) for child in graph.nodes[0].children
                           if child.local_name == "model"]
    while stack:
        node_id, path = stack.pop()
        node = graph.nodes[node_id]
        if any(a.name == "VARIABLE_VALUE" for a in node.attributes):
            found.add(path)
        stack.extend((c.node_id, f"{path}/{c.local_name}") for c in node.children)
    return found


def _training(*overrides, freeze=()):
    config = tiny_config(*overrides)
    prepare = (lambda model: warm_start.freeze(model, freeze)) if freeze else None
    return loop.build_training(config, tf.distribute.get_strategy(), prepare)


@pytest.mark.parametrize("arch, weights", [((), 14), (GPT2, 28)], ids=["llama", "gpt2"])
def test_checkpoint_names_every_model_variable_frozen_block_included(tmp_path, arch, weights):
    """Fails before the fix: tf.train.Checkpoint(model=...) missed Keras 3's list `blocks`, so
    the checkpoint named 4 model variables (embeddings, ln_f) of 28; the trainable block weights
    were there only positionally under the optimizer and the frozen block in no checkpoint.
    Reference: the SavedModel walk of the model (warm_start.variable_paths). 14 in the llama
    block: 2 x (two norm scales, qkv, proj, fc, fc_out) + embedding + final norm."""
    model, state, optimizer, _ = _training(*arch, freeze=["blocks:1"])
    assert model.non_trainable_weights                       # block_0 is frozen
    prefix = tf.train.Checkpoint(model=model, optimizer=optimizer, state=state).write(
        str(tmp_path / "ckpt"))
    assert model_paths_in_object_graph(prefix) == set(warm_start.variable_paths(model))
    # The reference itself covers the model: one path per weight, the same variables, so a
    # variable tracked by neither the object graph nor the walk is caught too.
    walked = warm_start.variable_paths(model).values()
    assert len(walked) == len(model.weights) == weights
    assert {id(v) for v in walked} == {id(w) for w in model.weights}
    # A model-only restore by name brings back every weight, the frozen block's included.
    fresh, *_ = _training("train.seed=99", *arch)
    before = [w.copy() for w in fresh.get_weights()]
    tf.train.Checkpoint(model=fresh).read(prefix).expect_partial().assert_existing_objects_matched()
    for got, want, old in zip(fresh.get_weights(), model.get_weights(), before):
        np.testing.assert_array_equal(got, want)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))

