"""A tiny GPT with fixed random weights, exported once per session (and pushed once), shared by
the export tests. Weights ~N(0, 0.3) instead of the 0.02 init: logits then differ by clear
margins, so greedy choices do not hinge on float rounding. The quantized variants are measured
on trained_tiny_model instead: N(0, 0.3) kernels multiply a vector's size by ~1.7 per matmul
(0.3 x sqrt(32)), far from any trained model, and the llama block's SwiGLU product squares
that, so its int8 and TFLite logits were 4-7% off float there for no fault of the export."""

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
    from components.tokenizer.byte_level import VOCAB_SIZE
    model = build_model(tiny_model_config(arch), context, vocab_size=VOCAB_SIZE)
    rng = np.random.RandomState(seed)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in model.get_weights()])
    return model


def gpt2_scale_weights(model, rng) -> list:
    """Every kernel and embedding ~N(0, 0.02), norm scales 1, offsets and biases 0: the model's
    own initial scale, drawn from `rng` (Keras' initializers draw from its global seed)."""
    def draw(variable):
        if variable.path.endswith(("scale", "gamma")):
            return np.ones(variable.shape, "float32")
        if variable.path.endswith(("beta", "bias")):
            return np.zeros(variable.shape, "float32")
        return rng.normal(0, 0.02, variable.shape).astype("float32")
    return [draw(v) for v in model.weights]


# Where trained_tiny_model keeps the weights it trained this session (set by the session fixture
# below): one folder shared by the session's xdist workers, so each set of arguments is trained
# once per session, not once per module (test_variants, test_hf and test_hf_transformers train the
# same gpt2 and llama: ~8 CPU-s each).
_TRAINED = {"dir": None}


@pytest.fixture(scope="session", autouse=True)
def _trained_weights_dir(tmp_path_factory):
    """This session's folder for trained_tiny_model's weights: the xdist workers' common parent
    (pytest-N), or this process' own base folder without xdist; never one of an earlier session,
    whose weights came from other code."""
    import os
    base = tmp_path_factory.getbasetemp()
    _TRAINED["dir"] = str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
                          / "trained-tiny-models")
    os.makedirs(_TRAINED["dir"], exist_ok=True)
    yield
    _TRAINED["dir"] = None


def trained_tiny_model(arch: str, steps: int = 200, seed: int = 0, context: int = CONTEXT,
                       config=None):
    """tiny_model_config(arch) (or `config`) after `steps` Adam steps (lr 3e-3, 16 windows a step) on the
    bytes of the stdlib json package, from gpt2_scale_weights: weights of a trained model's
    scale, for the quantized variants (about 2.3 nats per byte, 2-3 s on the 2-core VM). A new
    model each call; the weights are trained once per session for the same arguments (the first
    caller trains under a file lock, the others, in any xdist worker, load what it saved)."""
    import fcntl
    import hashlib
    import os
    from components.model.gpt import build_model
    from components.tokenizer.byte_level import VOCAB_SIZE
    config = config or tiny_model_config(arch)
    if _TRAINED["dir"] is None:
        return _train_tiny_model(config, steps, seed, context)
    key = hashlib.sha256(repr((config, steps, seed, context)).encode()).hexdigest()[:24]
    path = os.path.join(_TRAINED["dir"], f"{key}.npz")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            model = build_model(config, context, vocab_size=VOCAB_SIZE)
            with np.load(path) as saved:
                model.set_weights([saved[f"w{i}"] for i in range(len(saved.files))])
            return model
        model = _train_tiny_model(config, steps, seed, context)
        with open(path + ".partial", "wb") as fh:
            np.savez(fh, **{f"w{i}": w for i, w in enumerate(model.get_weights())})
        os.replace(path + ".partial", path)
    return model


def _train_tiny_model(config, steps: int, seed: int, context: int):
    from components.model.gpt import build_model
    from components.tokenizer.byte_level import VOCAB_SIZE
    from tests.support.texts import stdlib_texts
    text = np.frombuffer("".join(stdlib_texts(["json"])).encode(), np.uint8).astype(np.int32)
    model = build_model(config, context, vocab_size=VOCAB_SIZE)
    rng = np.random.RandomState(seed)
    model.set_weights(gpt2_scale_weights(model, rng))
    optimizer = tf.keras.optimizers.Adam(3e-3)

    @tf.function
    def step(inputs, targets):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                targets, model(inputs, training=True), from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
    for _ in range(steps):
        starts = rng.randint(0, len(text) - context - 1, 16)
        windows = np.stack([text[s:s + context + 1] for s in starts])
        step(windows[:, :-1], windows[:, 1:])
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


_SESSIONS = {}


def session_model(path: str) -> SessionModel:
    """SessionModel(path), loaded once per process: the tests only run signatures, which change
    neither the graph nor its variables (the session export is read by test_serving_signatures,
    test_serving_docs and test_serving_controls)."""
    if path not in _SESSIONS:
        _SESSIONS[path] = SessionModel(path)
    return _SESSIONS[path]


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
