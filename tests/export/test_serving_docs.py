"""The request bodies in docs/serving.md are the tested ones: each runs under the TF1 session
loader (TF Serving's) with its inputs shaped as TF Serving's REST API builds them, and every input
has the batch as dimension 0 (what --enable_batching requires)."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from components.serving.batching import BATCHING
from tests.export.conftest import session_model

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "serving.md")


def doc_bodies() -> list[dict]:
    with open(DOC, encoding="utf-8") as fh:
        return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", fh.read(), re.S)]


def rest_body_to_feeds(body: dict, signature) -> dict:
    """The input tensors TF Serving's REST API builds from a predict body (tensorflow.org/tfx/
    serving/api_rest, "Specifying input tensors"): row format `instances` is a list with one
    entry per example, a dict of named inputs (stacked along a new dimension 0) or a bare value
    when the signature has a single input; columnar format `inputs` is used as is."""
    dtypes = {name: tf.as_dtype(info.dtype) for name, info in signature.inputs.items()}
    if "instances" in body:
        rows = body["instances"]
        named = ({n: [r[n] for r in rows] for n in rows[0]} if isinstance(rows[0], dict)
                 else {next(iter(dtypes)): rows})
    else:
        named = body["inputs"] if isinstance(body["inputs"], dict) else {next(iter(dtypes)): body["inputs"]}
    assert sorted(named) == sorted(dtypes), "a body must give every input of its signature"
    return {n: tf.constant(v, dtypes[n]).numpy() for n, v in named.items()}


def test_the_doc_has_a_body_for_every_signature(exported):
    names = {body.get("signature_name", "serving_default") for body in doc_bodies()}
    assert names == set(session_model(exported).signatures)


@pytest.mark.parametrize("index", range(len(doc_bodies())))
def test_doc_body_runs_batched_under_the_session_loader(exported, index):
    """Caught: a scalar input (TF Serving's batcher rejects inputs without a batch dimension), an
    input name the doc and the signature disagree on, or an output without one row per example."""
    body = doc_bodies()[index]
    session = session_model(exported)
    name = body.get("signature_name", "serving_default")
    feeds = rest_body_to_feeds(body, session.signatures[name])
    batch = {value.shape[0] if value.ndim else None for value in feeds.values()}
    assert len(batch) == 1 and None not in batch, {k: v.shape for k, v in feeds.items()}
    rows = batch.pop()
    out = session.run(name, **feeds)
    for key, value in out.items():
        assert value.shape[0] == rows, (name, key)
        if key == "text":
            [text.decode("utf-8") for text in value]                 # JSON-safe


# -- TF Serving's request batcher ------------------------------------------------------------------


def pad_like_tf_serving(value, dims):
    """batching_util.cc PadTensor (pad_variable_length_inputs): the non-batch dims are padded up
    to `dims` with the tensor's FIRST element; an empty tensor in a batch of non-empty ones fails
    the whole merged batch."""
    if value.shape[1:] == tuple(dims):
        return value
    if value.size == 0:
        raise tf.errors.InvalidArgumentError(None, None, "Got empty tensor in batch of non-empty tensors")
    padded = np.full((value.shape[0],) + tuple(dims), value.flat[0], value.dtype)
    padded[tuple(slice(0, d) for d in value.shape)] = value
    return padded


def merge_like_tf_serving(requests: list[dict], allowed=BATCHING["allowed_batch_sizes"]) -> dict:
    """batching_session.cc MergeInputTensors: each input padded as above, concatenated along
    dim 0, then the batch padded up to the next allowed batch size with the first row."""
    merged = {}
    for name in requests[0]:
        values = [r[name] for r in requests]
        dims = tuple(max(v.shape[i] for v in values) for i in range(1, values[0].ndim))
        joined = np.concatenate([pad_like_tf_serving(v, dims) for v in values])
        size = min(a for a in allowed if a >= joined.shape[0])
        merged[name] = np.concatenate([joined] + [joined[:1]] * (size - joined.shape[0]))
    return merged


def fixed_seeds(feeds: dict) -> dict:
    """seed -1 draws a random seed per request: fixed here so a row alone and batched compare."""
    if "seed" in feeds:
        feeds = dict(feeds, seed=np.where(feeds["seed"] < 0, 1000, feeds["seed"]).astype(np.int32))
    return feeds


@pytest.mark.parametrize("name", sorted({b.get("signature_name", "serving_default") for b in doc_bodies()}))
def test_doc_bodies_batched_like_tf_serving_equal_each_request_alone(exported, name):
    """TF Serving (--enable_batching, batching_parameters) merges requests of one signature: every
    row of the merged batch must equal that row run alone (its non-batch dims cut back to the
    request's own). Caught: the former `stop` string[B, S] -- the doc's request without stop
    strings ([2, 0]) could not be merged with one that had some (the whole batch failed), and a
    padded request got its first stop string as an extra stop string in every row."""
    session = session_model(exported)
    signature = session.signatures[name]
    requests = [fixed_seeds(rest_body_to_feeds(b, signature)) for b in doc_bodies()
                if b.get("signature_name", "serving_default") == name]
    for order in (requests, requests[::-1]):
        merged = session.run(name, **merge_like_tf_serving(order))
        start = 0
        for request in order:
            alone = session.run(name, **request)
            rows = next(iter(request.values())).shape[0]
            for key, value in alone.items():
                got = merged[key][start:start + rows][tuple(slice(0, d) for d in value.shape)]
                if value.dtype == object:
                    assert got.tolist() == value.tolist(), (name, key)
                else:
                    np.testing.assert_allclose(got, value, atol=1e-5, err_msg=f"{name}.{key}")
            start += rows


def test_the_tensorflow_model_server_line_names_the_pushers_files():
    """The `tensorflow_model_server` command in docs/serving.md (the README links it) points at
    the deployment files the Pusher writes, by their constants, and turns on batching and
    warm-up. Caught: a deployment file renamed in components/push/deployment.py (or in the doc)
    while the other keeps the old name -- the operator's server then starts without it."""
    from components.push import layout
    from components.serving import warmup
    with open(DOC, encoding="utf-8") as fh:
        [command] = [b for b in re.findall(r"```\n(.*?)```", fh.read(), re.S) if "tensorflow_model_server" in b]
    flags = dict(re.findall(r"--([\w]+)=(\S+)", command))
    assert os.path.basename(flags["model_config_file"]) == layout.MODELS_CONFIG
    assert os.path.basename(flags["batching_parameters_file"]) == layout.BATCHING_FILE
    assert os.path.dirname(flags["model_config_file"]) == os.path.dirname(flags["batching_parameters_file"])
    assert flags["enable_batching"] == flags["enable_model_warmup"] == "true"
    assert warmup.WARMUP_FILE == os.path.join("assets.extra", "tf_serving_warmup_requests")  # TF Serving's name
