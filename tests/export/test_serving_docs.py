"""The request bodies in docs/serving.md are the tested ones: each runs under the TF1 session
loader (TF Serving's) with its inputs shaped as TF Serving's REST API builds them, and every input
has the batch as dimension 0 (what --enable_batching requires)."""

import json
import os
import re

import pytest
import tensorflow as tf

from tests.export.conftest import SessionModel

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
    assert names == set(SessionModel(exported).signatures)


@pytest.mark.parametrize("index", range(len(doc_bodies())))
def test_doc_body_runs_batched_under_the_session_loader(exported, index):
    """Caught: a scalar input (TF Serving's batcher rejects inputs without a batch dimension), an
    input name the doc and the signature disagree on, or an output without one row per example."""
    body = doc_bodies()[index]
    session = _session(exported)
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


_SESSIONS = {}


def _session(path):
    if path not in _SESSIONS:
        _SESSIONS[path] = SessionModel(path)
    return _SESSIONS[path]
