"""The serving SavedModel: loader-proof (TF1 session loader and tf.saved_model.load, exported and
pushed copies), TF Serving REST request shapes, KV-cache decoding against full-window references,
and the bad-input matrix."""

import numpy as np
import pytest
import tensorflow as tf

from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID
from tests.export.conftest import CONTEXT, SessionModel

PROMPTS = np.array([b"def main(", b"import os\n", b""], dtype=object)
# One set of inputs per signature, shaped as a batch of 3 rows.
INPUTS = {
    "serving_default": {"prompts": PROMPTS},
    "generate": {"prompt": PROMPTS, "max_new_tokens": np.array([5, 7, 0], np.int32)},
    "sample": {"prompt": PROMPTS, "max_new_tokens": np.int32(6), "temperature": np.float32(0.8),
               "seed": np.array([1, 2, 3], np.int32)},
    "token_logits": {"input_ids": np.array([[BOS_ID, 100, 101, 40], [BOS_ID, 1, 2, 3],
                                            [BOS_ID, 255, 0, PAD_ID]], np.int32)},
}


def run_loaded(loaded, name, inputs):
    out = loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}


@pytest.mark.parametrize("which", ["exported", "pushed"])
def test_every_signature_runs_under_both_loaders(which, request):
    """TF Serving's loader (TF1 session) and TF2's tf.saved_model.load give the same outputs for
    every signature. The Keras-3-in-a-tf.Module export this replaces failed the session loader
    with 'Could not find variable gpt/embeddings_1'."""
    path = request.getfixturevalue(which)
    session, loaded = SessionModel(path), tf.saved_model.load(path)
    assert sorted(session.signatures) == sorted(loaded.signatures) == sorted(INPUTS)
    for name, inputs in INPUTS.items():
        a, b = session.run(name, **inputs), run_loaded(loaded, name, inputs)
        assert sorted(a) == sorted(b), name
        for key in a:
            assert a[key].shape[0] == 3, (name, key)        # one output row per input row
            if a[key].dtype == object:
                assert a[key].tolist() == b[key].tolist(), (name, key)
            else:
                np.testing.assert_allclose(a[key], b[key], atol=1e-5, err_msg=f"{name}.{key}")
    out = session.run("generate", **INPUTS["generate"])
    assert out["new_tokens"].tolist()[2] == 0 and out["text"][2] == b""   # max_new_tokens 0


def test_weights_are_stored_once(exported, model):
    """The checkpoint holds each weight once. ExportArchive.track(model) would add the Keras
    variable wrappers as second copies of every weight (2x on disk, 449,665 values for tiny's
    224,832 parameters)."""
    stored = sum(int(np.prod(shape)) for name, shape in
                 tf.train.list_variables(f"{exported}/variables/variables") if shape)
    assert stored == sum(w.size for w in model.get_weights())


def rest_body_to_tensors(body: dict, signature) -> dict:
    """The input tensors TF Serving's REST API builds from a predict body (tensorflow.org/tfx/
    serving/api_rest, "Specifying input tensors"): row format `instances` is a list with one
    entry per example, a dict of named inputs (stacked along a new dimension 0, so every named
    input must be given per row) or a bare value when the signature has a single input; columnar
    format `inputs` is a dict of named tensors (or a bare value) used as is, scalars included."""
    names = list(signature.structured_input_signature[1])
    if "instances" in body:
        rows = body["instances"]
        if all(isinstance(r, dict) for r in rows):
            return {n: tf.constant([r[n] for r in rows], signature.structured_input_signature[1][n].dtype)
                    for n in names}
        assert len(names) == 1
        return {names[0]: tf.constant(rows, signature.structured_input_signature[1][names[0]].dtype)}
    inputs = body["inputs"]
    if not isinstance(inputs, dict):
        inputs = {names[0]: inputs}
    return {n: tf.constant(v, signature.structured_input_signature[1][n].dtype) for n, v in inputs.items()}


REST_BODIES = [
    ("serving_default", {"instances": ["def main(", "import os"]}),
    ("serving_default", {"inputs": {"prompts": ["def main(", "import os"]}}),
    ("generate", {"instances": [{"prompt": "def main(", "max_new_tokens": 8},
                                {"prompt": "import os", "max_new_tokens": 3}]}),
    ("generate", {"inputs": {"prompt": ["def main(", "import os"], "max_new_tokens": 8}}),
    ("sample", {"instances": [{"prompt": "def main(", "max_new_tokens": 8, "temperature": 0.7, "seed": 1},
                              {"prompt": "import os", "max_new_tokens": 3, "temperature": 0.0, "seed": 2}]}),
    ("sample", {"inputs": {"prompt": ["def main(", "import os"], "max_new_tokens": 8,
                           "temperature": 0.7, "seed": [1, 2]}}),
    ("token_logits", {"instances": [[BOS_ID, 100, 101], [BOS_ID, 1, 2]]}),
    ("token_logits", {"inputs": {"input_ids": [[BOS_ID, 100, 101], [BOS_ID, 1, 2]]}}),
]


@pytest.mark.parametrize("name, body", REST_BODIES, ids=[f"{n}-{next(iter(b))}" for n, b in REST_BODIES])
def test_rest_bodies_row_and_columnar(loaded, name, body):
    """Each signature accepts what TF Serving builds from both REST formats and answers with one
    output row per example (row format requires every output's dimension 0 to be the batch)."""
    signature = loaded.signatures[name]
    out = signature(**rest_body_to_tensors(body, signature))
    batch = len(body["instances"]) if "instances" in body else 2
    for key, value in out.items():
        assert value.shape[0] == batch, (key, value.shape)
    if name == "generate" and "instances" in body:
        new_tokens = out["new_tokens"].numpy()                   # rows stop at their own limits
        assert new_tokens[0] <= 8 and new_tokens[1] <= 3


def test_rows_do_not_depend_on_their_batch(loaded):
    """TF Serving's request batching merges requests: a row's output is the same alone or batched."""
    sample = loaded.signatures["sample"]
    batched = sample(prompt=tf.constant(["def main(", "import os", "x"]), max_new_tokens=tf.constant([9, 9, 9]),
                     temperature=tf.constant([0.8, 0.8, 0.0]), seed=tf.constant([5, 6, 7]))["text"].numpy()
    alone = [sample(prompt=tf.constant([p]), max_new_tokens=tf.constant(9), temperature=tf.constant(t),
                    seed=tf.constant(s))["text"].numpy()[0]
             for p, t, s in (("def main(", 0.8, 5), ("import os", 0.8, 6), ("x", 0.0, 7))]
    assert batched.tolist() == alone
    again = sample(prompt=tf.constant(["def main("]), max_new_tokens=tf.constant(9),
                   temperature=tf.constant(0.8), seed=tf.constant(5))["text"].numpy()[0]
    other_seed = sample(prompt=tf.constant(["def main("]), max_new_tokens=tf.constant(9),
                        temperature=tf.constant(0.8), seed=tf.constant(99))["text"].numpy()[0]
    assert again == alone[0] and other_seed != alone[0]


# ------------------------------------------------------------------------------------------------
# KV cache


def reference_greedy(model, prompt: bytes, max_new_tokens: int, context: int = CONTEXT) -> bytes:
    """Independent reference: plain Keras forward passes over the whole window for every token,
    with the documented window rule (last `context` ids of the prompt; a full window is cut to
    its last context // 2 ids before the next id is appended)."""
    window = ([BOS_ID] + list(prompt))[-context:]
    out = []
    for _ in range(max_new_tokens):
        logits = model(np.array([window], np.int32)).numpy()[0, -1]
        logits[PAD_ID] = -1e9
        token = int(np.argmax(logits))
        if token == EOS_ID:
            break
        out.append(token)
        if len(window) == context:
            window = window[-(context // 2):]
        window.append(token)
    return bytes(t for t in out if t < 256)


@pytest.fixture(scope="module")
def uncached_generate(model):
    from components.training.export import LanguageModelServer
    server = LanguageModelServer(model, CONTEXT)
    return tf.function(lambda p, n: server.generate(p, n, cached=False), autograph=False)


@pytest.mark.parametrize("prompt, new", [(b"def ", 10), (b"import os\n", 5),   # inside the context
                                         (b"def main(", 40),                   # slides twice
                                         (b"x" * 50, 12),                      # prompt > context
                                         (b"", 20)])                           # empty prompt
def test_cached_greedy_equals_full_window_reference(model, loaded, uncached_generate, prompt, new):
    """The exported (cached) generate equals the full-window no-cache decoder token for token and
    both equal the plain-Keras reference, inside the context and past it (window sliding).
    Caught: writing the new key at the wrong slot, or letting a query see slots > its position,
    changes the text after a few tokens; cutting the window differently changes it past 16 ids."""
    cached = loaded.signatures["generate"](prompt=tf.constant([prompt]), max_new_tokens=tf.constant(new))
    uncached = uncached_generate(tf.constant([prompt]), tf.constant(new))
    expected = reference_greedy(model, prompt, new)
    assert cached["text"].numpy()[0] == uncached["text"].numpy()[0] == expected
    assert cached["new_tokens"].numpy()[0] == len(expected)


def test_cached_batch_equals_rows_alone(loaded):
    """Rows of different lengths share one cache tensor; each row's slots and mask are its own."""
    prompts = [b"def ", b"a much longer prompt that slides", b""]
    generate = loaded.signatures["generate"]
    batched = generate(prompt=tf.constant(prompts), max_new_tokens=tf.constant(30))["text"].numpy()
    alone = [generate(prompt=tf.constant([p]), max_new_tokens=tf.constant(30))["text"].numpy()[0]
             for p in prompts]
    assert batched.tolist() == alone


# ------------------------------------------------------------------------------------------------
# Bad input: a defined result or InvalidArgument from the graph (HTTP 400 in TF Serving)


def test_prompt_longer_than_context_uses_its_last_window(loaded, model):
    long = b"print('hello')\n" * 20                     # 300 bytes, context 16
    out = loaded.signatures["serving_default"](prompts=tf.constant([long]))
    assert out["prompt_tokens"].numpy().tolist() == [CONTEXT]
    text = loaded.signatures["generate"](prompt=tf.constant([long]), max_new_tokens=tf.constant(8))
    assert text["text"].numpy()[0] == reference_greedy(model, long, 8)


def test_empty_prompt_continues_from_bos(loaded, model):
    out = loaded.signatures["serving_default"](prompts=tf.constant([b""]))
    assert out["prompt_tokens"].numpy().tolist() == [1]   # BOS only
    text = loaded.signatures["generate"](prompt=tf.constant([b""]), max_new_tokens=tf.constant(6))
    assert text["text"].numpy()[0] == reference_greedy(model, b"", 6)


def test_zero_new_tokens_returns_empty_text(loaded):
    out = loaded.signatures["generate"](prompt=tf.constant(["def", "x"]), max_new_tokens=tf.constant(0))
    assert out["text"].numpy().tolist() == [b"", b""] and out["new_tokens"].numpy().tolist() == [0, 0]


@pytest.mark.parametrize("name, inputs, message", [
    ("generate", {"max_new_tokens": -1}, "max_new_tokens must be >= 0"),
    ("generate", {"max_new_tokens": 65}, "max_new_tokens must be <= 64"),
    ("generate", {"max_new_tokens": 2**31 - 1}, "max_new_tokens must be <= 64"),
    ("generate", {"max_new_tokens": [3, 4, 5]}, "max_new_tokens must be a scalar or have one value per prompt"),
    ("generate", {"max_new_tokens": [[3]]}, "max_new_tokens must be a scalar or a vector"),
    ("sample", {"temperature": -0.5}, "temperature must be >= 0"),
    ("sample", {"temperature": float("nan")}, "temperature must be finite"),
    ("token_logits", {"input_ids": [[1] * (CONTEXT + 1)]}, f"at most {CONTEXT} positions"),
    ("token_logits", {"input_ids": [[BOS_ID, 300]]}, "input_ids must be < 259"),
])
def test_bad_values_are_invalid_argument_under_the_session_loader(exported, name, inputs, message):
    """What TF Serving would run: the session loader raises InvalidArgument (HTTP 400) naming the
    input; the server process lives on (the same session answers the next request)."""
    session = _session(exported)
    full = {"generate": {"prompt": np.array([b"ab", b"cd"], object), "max_new_tokens": 3},
            "sample": {"prompt": np.array([b"ab", b"cd"], object), "max_new_tokens": 3,
                       "temperature": np.float32(0.5), "seed": 1},
            "token_logits": {}}[name]
    full.update({k: np.array(v) for k, v in inputs.items()})
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        session.run(name, **full)
    assert session.run("generate", prompt=np.array([b"ok"], object), max_new_tokens=2)["new_tokens"].shape == (1,)


def test_temperature_zero_is_greedy(loaded):
    prompts = tf.constant(["def main(", "import"])
    greedy = loaded.signatures["generate"](prompt=prompts, max_new_tokens=tf.constant(12))["text"]
    cold = loaded.signatures["sample"](prompt=prompts, max_new_tokens=tf.constant(12),
                                       temperature=tf.constant(0.0), seed=tf.constant(3))["text"]
    assert greedy.numpy().tolist() == cold.numpy().tolist()


_SESSIONS = {}


def _session(path):
    if path not in _SESSIONS:
        _SESSIONS[path] = SessionModel(path)
    return _SESSIONS[path]


def test_bigtrain_generate_uses_the_pushed_artifact_and_names_bad_input(exported, tmp_path, capsys):
    """`bigtrain generate` runs the pushed version's signatures (batch of one prompt); a value the
    signature rejects is a one-line error naming the input, exit 1."""
    from components.push.push import push_model
    from runners import cli
    pushed = push_model(exported, str(tmp_path / "serving" / "gpt"))
    capsys.readouterr()
    assert cli.main(["generate", "def ", "--home", str(tmp_path), "--max-new-tokens", "6",
                     "--temperature", "0"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("def ") and f"serving/gpt/{pushed.version}]" in out.err
    assert cli.main(["generate", "def ", "--home", str(tmp_path), "--max-new-tokens", "-1"]) == 1
    assert "max_new_tokens must be >= 0" in capsys.readouterr().err
    assert cli.main(["generate", "def ", "--home", str(tmp_path), "--max-new-tokens", "5",
                     "--temperature", "-1"]) == 1
    assert capsys.readouterr().err == "bigtrain generate: temperature must be >= 0 (0 = greedy).\n"
