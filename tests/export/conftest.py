"""A tiny GPT with fixed random weights, exported once per session (and pushed once), shared by
the export tests. Weights ~N(0, 0.3) instead of the 0.02 init: logits then differ by clear
margins, so greedy choices do not hinge on float rounding."""

import numpy as np
import pytest
import tensorflow as tf

CONTEXT = 16


def tiny_model_config(arch: str = "llama"):
    """2 x 32, 2 heads; the llama block with one key/value head (grouped-query attention)."""
    from components.config import ModelConfig
    return ModelConfig(arch=arch, n_layer=2, n_head=2, d_model=32,
                       n_kv_head=1 if arch == "llama" else 0)


def tiny_model(seed: int = 0, context: int = CONTEXT, arch: str = "llama"):
    from components.model.gpt import build_model
    model = build_model(tiny_model_config(arch), context)
    rng = np.random.RandomState(seed)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in model.get_weights()])
    return model


class SessionModel:
    """A SavedModel restored by the TF1 session loader (what TF Serving, KServe and
    `saved_model_cli run` use); signatures run by feeding the SignatureDef's tensor names."""

    def __init__(self, path: str):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], path)
        self.signatures = {k: v for k, v in meta.signature_def.items() if not k.startswith("__")}

    def run(self, name: str, **inputs) -> dict:
        signature = self.signatures[name]
        feeds = {signature.inputs[k].name: v for k, v in inputs.items()}
        keys = sorted(signature.outputs)
        values = self.session.run([signature.outputs[k].name for k in keys], feed_dict=feeds)
        return dict(zip(keys, values))


@pytest.fixture(scope="session")
def model():
    return tiny_model()


@pytest.fixture(scope="session")
def exported(model, tmp_path_factory):
    from components.serving.export import write_serving_model
    from components.tokenizer.byte_level import ByteTokenizer
    path = str(tmp_path_factory.mktemp("export") / "Format-Serving")
    return write_serving_model(model, CONTEXT, path, tokenizer=ByteTokenizer(),
                               max_new_tokens_limit=64)


@pytest.fixture(scope="session")
def pushed(exported, tmp_path_factory):
    from components.push.push import push_model
    return push_model(exported, str(tmp_path_factory.mktemp("serving") / "gpt")).path


@pytest.fixture(scope="session")
def loaded(exported):
    return tf.saved_model.load(exported)
