"""The serving SavedModel: loader-proof (TF1 session loader and tf.saved_model.load, exported and
pushed copies), TF Serving REST request shapes, KV-cache decoding past the window against
plain-Keras references for both archs (gpt2 re-fills a half window; llama's cache slides), and
the bad-input matrix."""

import functools
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer
from tests.export.conftest import CONTEXT, SessionModel, session_model, tiny_model
from tests.support.serving_calls import INPUTS, generate, run_loaded, sample, sample_request


# The pushed copy is the same graph behind the Pusher: slow tier (7 s; fast tier: docs/benchmarks.md).
@pytest.mark.parametrize("which", ["exported", pytest.param("pushed", marks=pytest.mark.slow)])
def test_every_signature_runs_under_both_loaders(which, request):
    """TF Serving's loader (TF1 session) and TF2's tf.saved_model.load give the same outputs for
    every signature. The Keras-3-in-a-tf.Module export this replaces failed the session loader
    with 'Could not find variable gpt/embeddings_1'."""
    path = request.getfixturevalue(which)
    if which == "exported":   # the session's loaded export and its one TF1 session
        session, loaded = session_model(path), request.getfixturevalue("loaded")
    else:
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
    assert out["new_tokens"].tolist()[2] == 0 and out["text_bytes"][2] == b""   # max_new_tokens 0


def test_weights_are_stored_once(exported, model):
    """The checkpoint holds each weight once. ExportArchive.track(model) would add the Keras
    variable wrappers as second copies of every weight (2x on disk, 449,665 values for tiny's
    224,832 parameters)."""
    stored = sum(int(np.prod(shape)) for name, shape in
                 tf.train.list_variables(f"{exported}/variables/variables") if shape)
    assert stored == sum(w.size for w in model.get_weights())


def test_rows_do_not_depend_on_their_batch(loaded):
    """TF Serving's request batching merges requests: a row's output is the same alone or batched."""
    batched = sample(loaded, ["def main(", "import os", "x"], 9, [0.8, 0.8, 0.0], [5, 6, 7])["text_bytes"].numpy()
    alone = [sample(loaded, [p], 9, t, s)["text_bytes"].numpy()[0]
             for p, t, s in (("def main(", 0.8, 5), ("import os", 0.8, 6), ("x", 0.0, 7))]
    assert batched.tolist() == alone
    again = sample(loaded, ["def main("], 9, 0.8, 5)["text_bytes"].numpy()[0]
    other_seed = sample(loaded, ["def main("], 9, 0.8, 99)["text_bytes"].numpy()[0]
    assert again == alone[0] and other_seed != alone[0]


# ------------------------------------------------------------------------------------------------
# KV cache


def reference_greedy(model, prompt: bytes, max_new_tokens: int, context: int = CONTEXT) -> bytes:
    """Independent reference (gpt2): plain Keras forward passes over the whole window for every
    token, with the documented window rule (last `context` ids of the prompt; a full window is
    cut to its last context // 2 ids before the next id is appended)."""
    window = ([BOS_ID] + list(prompt))[-context:]
    out = []
    for _ in range(max_new_tokens):
        token = _greedy(model(np.array([window], np.int32)).numpy()[0, -1])
        if token == EOS_ID:
            break
        out.append(token)
        if len(window) == context:
            window = window[-(context // 2):]
        window.append(token)
    return bytes(t for t in out if t < 256)


def _greedy(logits):
    logits[[PAD_ID, BOS_ID]] = -np.inf   # never a continuation
    return int(np.argmax(logits))


def reference_sliding_greedy(model, prompt: bytes, max_new_tokens: int, context: int = CONTEXT) -> bytes:
    """Independent reference (rotary): plain Keras forward passes over the whole sequence, the
    last `context` ids of the prompt and then every new id at positions 0, 1, ..., with the
    model's causal mask swapped for a band: in every layer query p sees keys p - context < j <= p
    (sliding-window attention; the windowed cache's definition, docs/serving.md)."""
    def band(query_steps, key_steps):
        offset = tf.range(query_steps)[:, None] - tf.range(key_steps)[None, :]
        return (offset >= 0) & (offset < context)
    ids = ([BOS_ID] + list(prompt))[-context:]
    out = []
    with mock.patch("components.model.llama.causal_mask", band):
        for _ in range(max_new_tokens):
            token = _greedy(model(np.array([ids], np.int32)).numpy()[0, -1])
            if token == EOS_ID:
                break
            out.append(token)
            ids.append(token)
    return bytes(t for t in out if t < 256)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request, tmp_path_factory):
    """One arch's tiny model, its export (path, tf.saved_model.load), the no-cache generate and
    the greedy reference of its window rule. llama is the session's export."""
    from components.serving.export import write_serving_model
    from components.serving.server import LanguageModelServer
    if request.param == "llama":
        model, path, loaded = (request.getfixturevalue(f) for f in ("model", "exported", "loaded"))
    else:
        model = tiny_model(arch="gpt2")
        path = write_serving_model(model, CONTEXT, str(tmp_path_factory.mktemp("gpt2") / "Format-Serving"),
                                   tokenizer=ByteTokenizer(), max_new_tokens_limit=64)
        loaded = tf.saved_model.load(path)
    server = LanguageModelServer(model, CONTEXT, tokenizer=ByteTokenizer())
    reference = reference_sliding_greedy if request.param == "llama" else reference_greedy
    return SimpleNamespace(
        model=model, path=path, loaded=loaded, reference=functools.partial(reference, model),
        uncached=tf.function(lambda p, n: server.generate(p, n, cached=False), autograph=False))


@pytest.mark.parametrize("prompt, new", [(b"def ", 10), (b"import os\n", 5),   # inside the context
                                         (b"def main(", 40),                   # past it: 2.5 windows
                                         (b"x" * 50, 12),                      # prompt > context
                                         (b"", 20)])                           # empty prompt
@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_cached_greedy_equals_the_reference(decoder, prompt, new):
    """The exported (cached) generate equals the no-cache decoder token for token and both equal
    the plain-Keras reference of the arch's window rule, inside the context and past it (gpt2:
    half-window re-fill; llama: the cache slides, sliding-window attention). Caught: writing the
    new key at the wrong slot, rotating it at its slot instead of its position, or letting a
    query see slots > its own changes the text after a few tokens; another window rule changes
    it past 16 ids."""
    cached = generate(decoder.loaded, [prompt], new)
    uncached = decoder.uncached(tf.constant([prompt]), tf.constant([new]))
    expected = decoder.reference(prompt, new)
    assert cached["text_bytes"].numpy()[0] == uncached["text_bytes"].numpy()[0] == expected
    assert cached["new_tokens"].numpy()[0] == len(expected)


PAST_THE_WINDOW = [b"def ", b"a much longer prompt that slides", b""]


@pytest.mark.parametrize("limits", [[30, 30, 30], [3, 40, 25]])
def test_cached_batch_equals_rows_alone(decoder, limits):
    """Rows of different lengths share one cache tensor; each row's slots, positions and mask are
    its own. The rows fill their windows at different steps (the long prompt at once, "def "
    after 11 ids, "" after 15) and, with different limits, end at different steps while the rest
    decode on without them (decoding.step_rows): caught, a slide or re-fill of the wrong rows, a
    scatter into the wrong rows, or one position counter for the batch."""
    batched = decoder.loaded.signatures["generate"](prompt=tf.constant(PAST_THE_WINDOW),
                                                    max_new_tokens=tf.constant(limits))
    alone = [generate(decoder.loaded, [p], n)["text_bytes"].numpy()[0] for p, n in zip(PAST_THE_WINDOW, limits)]
    assert batched["text_bytes"].numpy().tolist() == alone
    assert batched["new_tokens"].numpy().tolist() == [len(a) for a in alone]
    uncached = decoder.uncached(tf.constant(PAST_THE_WINDOW), tf.constant(limits))
    assert uncached["text_bytes"].numpy().tolist() == alone


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_past_the_window_under_the_session_loader(decoder):
    """TF Serving's loader runs the same window rule: a batch decoding past the window equals
    each row's plain-Keras reference."""
    limits = np.array([20, 40, 25], np.int32)
    out = session_model(decoder.path).run("generate", prompt=np.array(PAST_THE_WINDOW, object),
                                     max_new_tokens=limits)
    assert out["text_bytes"].tolist() == [decoder.reference(p, n) for p, n in zip(PAST_THE_WINDOW, limits)]


def test_rotary_positions_past_two_to_the_16_are_a_named_error(model):
    """A sliding row's positions reach context + max_new_tokens: the limit that could pass 2^16
    (float32 rotary angles lose precision) is refused at export, naming the setting; gpt2's
    positions restart, so it has no such bound."""
    from components.serving.server import LanguageModelServer
    with pytest.raises(ValueError, match="export.max_new_tokens=65521 plus the context"):
        LanguageModelServer(model, CONTEXT, 2**16 - CONTEXT + 1, tokenizer=ByteTokenizer())
    LanguageModelServer(model, CONTEXT, 2**16 - CONTEXT, tokenizer=ByteTokenizer())
    LanguageModelServer(tiny_model(arch="gpt2"), CONTEXT, 2**20, tokenizer=ByteTokenizer())


# ------------------------------------------------------------------------------------------------
# Bad input: a defined result or InvalidArgument from the graph (HTTP 400 in TF Serving)


def test_prompt_longer_than_context_uses_its_last_window(decoder):
    long = b"print('hello')\n" * 20                     # 300 bytes, context 16
    out = decoder.loaded.signatures["serving_default"](prompt=tf.constant([long]))
    assert out["prompt_tokens"].numpy().tolist() == [CONTEXT]
    text = generate(decoder.loaded, [long], 8)
    assert text["text_bytes"].numpy()[0] == decoder.reference(long, 8)


def test_empty_prompt_continues_from_bos(decoder):
    out = decoder.loaded.signatures["serving_default"](prompt=tf.constant([b""]))
    assert out["prompt_tokens"].numpy().tolist() == [1]   # BOS only
    text = generate(decoder.loaded, [b""], 6)
    assert text["text_bytes"].numpy()[0] == decoder.reference(b"", 6)


def test_zero_new_tokens_returns_empty_text(loaded):
    out = generate(loaded, ["def", "x"], 0)
    assert out["text_bytes"].numpy().tolist() == [b"", b""] and out["new_tokens"].numpy().tolist() == [0, 0]


@pytest.mark.parametrize("name, inputs, message", [
    ("generate", {"max_new_tokens": -1}, "max_new_tokens must be >= 0"),
    ("generate", {"max_new_tokens": 65}, "max_new_tokens must be <= 64"),
    ("generate", {"max_new_tokens": 2**31 - 1}, "max_new_tokens must be <= 64"),
    ("generate", {"max_new_tokens": [3, 4, 5]}, "max_new_tokens must have one value per prompt"),
    ("sample", {"temperature": -0.5}, "temperature must be >= 0"),
    ("sample", {"temperature": float("nan")}, "temperature must be finite"),
    ("sample", {"top_p": 0.0}, "top_p must be > 0 and <= 1"),
    ("sample", {"top_p": 1.5}, "top_p must be > 0 and <= 1"),
    ("sample", {"top_k": -1}, "top_k must be >= 0"),
    ("sample", {"seed": [1, 2, 3]}, "seed must have one value per prompt"),
    ("sample", {"stop": [b"\n\x1f", b"x\x1fy"]}, "stop strings must not be empty"),    # trailing
    ("sample", {"stop": [b"\n", b"\x1fy"]}, "stop strings must not be empty"),         # leading
    ("sample", {"stop": [b"x\x1f\x1fy", b""]}, "stop strings must not be empty"),      # doubled
    ("sample", {"stop": [b"\n"]}, "stop must have one value per prompt"),
    ("score", {"continuation": [b"x" * CONTEXT, b"y"]}, f"continuation must be at most {CONTEXT - 1} tokens"),
    ("score", {"continuation": [b"x"]}, "continuation must have one value per prompt"),
    ("token_logits", {"input_ids": [[1] * (CONTEXT + 1)]}, f"at most {CONTEXT} positions"),
    ("token_logits", {"input_ids": [[BOS_ID, 300]]}, "input_ids must be < 259"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None)
def test_bad_values_are_invalid_argument_under_the_session_loader(exported, name, inputs, message):
    """What TF Serving would run: the session loader raises InvalidArgument (HTTP 400) naming the
    input; the server process lives on (the same session answers the next request). Scalars are
    broadcast to the 2 rows here (the signature itself takes one value per row)."""
    session = session_model(exported)
    full = {"generate": {"prompt": np.array([b"ab", b"cd"], object), "max_new_tokens": [3, 3]},
            "sample": sample_request([b"ab", b"cd"], 3, 0.5, 1, stop=[b"\n"]),
            "score": {"prompt": np.array([b"ab", b"cd"], object), "continuation": np.array([b"x", b"y"], object)},
            "token_logits": {}}[name]
    for key, value in inputs.items():
        full[key] = np.array(value) if np.ndim(value) else np.full([2], value, np.asarray(full[key]).dtype)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        session.run(name, **full)
    assert session.run("generate", prompt=np.array([b"ok"], object),
                       max_new_tokens=np.array([2], np.int32))["new_tokens"].shape == (1,)


def test_temperature_zero_is_greedy(loaded):
    greedy = generate(loaded, ["def main(", "import"], 12)["text_bytes"]
    cold = sample(loaded, ["def main(", "import"], 12, 0.0, 3)["text_bytes"]
    assert greedy.numpy().tolist() == cold.numpy().tolist()


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_bigtrain_generate_uses_the_pushed_artifact_and_names_bad_input(exported, tmp_path, capsys):
    """`bigtrain generate` runs the pushed version's signatures (batch of one prompt); a value the
    signature rejects is a one-line error naming the input, exit 1."""
    from components.push.push import push_model
    from runners.cli import app as cli
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
    assert capsys.readouterr().err == "bigtrain generate: temperature must be >= 0 (0 = greedy)\n"


def test_generate_and_sample_trace_one_shared_decoding_loop(monkeypatch):
    """The decoding loop (prefill, step, refill: the model traced 4-5 times) is traced once for
    both generate and sample (LanguageModelServer._sampling_decode), about a quarter of an export
    (int8, 2 x 64: 11.4 -> 8.5 s). Counts the loop's Python runs, one per trace, while both
    signatures are traced. Caught: generate with a loop of its own, or a new tf.function per
    call. (Greedy rows beside sampled ones: test_rows_do_not_depend_on_their_batch.)"""
    from components.serving.export import input_signatures, signature_functions
    from components.serving.server import LanguageModelServer
    server = LanguageModelServer(tiny_model(), CONTEXT, 8, tokenizer=ByteTokenizer())
    traced, decode = [], server.decode
    monkeypatch.setattr(server, "decode", lambda *args, **kw: traced.append(1) or decode(*args, **kw))
    for name in ("generate", "sample"):
        tf.function(signature_functions(server)[name], input_signature=input_signatures()[name],
                    autograph=False).get_concrete_function()
    assert len(traced) == 1


def test_the_forward_signatures_trace_one_shared_forward_pass():
    """token_logits, serving_default and score call the model's forward pass through one
    tf.function (LanguageModelServer._logits): an export traces it once for the three, not once
    per signature, and saves one copy of it. Counts the model's Python calls, one per trace,
    while the three signatures are traced. Caught: a signature calling the model itself."""
    from components.serving.export import input_signatures, signature_functions
    from components.serving.server import LanguageModelServer
    server = LanguageModelServer(tiny_model(), CONTEXT, 8, tokenizer=ByteTokenizer())
    traced, model = [], server.model
    server.model = lambda *args, **kw: traced.append(1) or model(*args, **kw)
    for name in ("token_logits", "serving_default", "score"):
        tf.function(signature_functions(server)[name], input_signature=input_signatures()[name],
                    autograph=False).get_concrete_function()
    assert len(traced) == 1


def test_each_endpoint_is_traced_once_per_export_without_gradients(tmp_path):
    """write_archive traces every endpoint once; keras.export.ExportArchive traced each twice (its
    variable listing outside the save context, then tf.saved_model.save inside it: the trace cache
    keys on the save options), about half of an export's time. No gradient functions are saved
    (the model's custom gradients were 18 of them here, 90 for int8). The archive still restores
    with the model's logits."""
    from tensorflow.core.protobuf import saved_model_pb2
    from components.serving.export import input_signatures, signature_functions, write_archive
    from components.serving.server import LanguageModelServer
    model = tiny_model()
    server = LanguageModelServer(model, CONTEXT, 8, tokenizer=ByteTokenizer())
    endpoints = {name: tf.function(signature_functions(server)[name], autograph=False,
                                   input_signature=input_signatures()[name])
                 for name in ("token_logits", "score")}
    write_archive(str(tmp_path / "sm"), endpoints)
    assert {n: f.experimental_get_tracing_count() for n, f in endpoints.items()} == \
        {"token_logits": 1, "score": 1}
    saved = saved_model_pb2.SavedModel.FromString((tmp_path / "sm" / "saved_model.pb").read_bytes())
    assert len(saved.meta_graphs[0].graph_def.library.registered_gradients) == 0
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    assert sorted(loaded.signatures) == ["score", "serving_default", "token_logits"]
    ids = INPUTS["token_logits"]["input_ids"]
    np.testing.assert_allclose(loaded.signatures["token_logits"](input_ids=tf.constant(ids))["logits"],
                               model(ids).numpy(), atol=1e-5)
