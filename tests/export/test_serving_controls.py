"""Sampling controls (top_k, top_p, stop, seed), PAD/BOS never chosen, JSON-safe text, the `score`
signature against a Python reference, prompts cut before densifying, and the warm-up records
replayed under the TF1 session loader (TF Serving's)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from components.tokenizer.byte_level import BOS_ID, PAD_ID, ByteTokenizer
from tests.export.conftest import CONTEXT, SessionModel, session_model, tiny_model
from tests.support.serving_calls import generate, sample, sample_request


def biased_model(*targets):
    """A tiny model whose every logit is led by `targets`: ln_f's output is pinned to a multiple
    of their (tied) embedding rows, whatever the input (LayerNorm's offset: the gpt2 block)."""
    model = tiny_model(arch="gpt2")
    embedding = model.token_embedding.get_weights()[0]
    embedding[list(targets)] *= 4.0                            # the tied head: long target rows
    model.token_embedding.set_weights([embedding])
    gamma, _ = model.ln_f.get_weights()
    model.ln_f.set_weights([np.zeros_like(gamma), 5.0 * embedding[list(targets)].sum(0)])
    top = np.argsort(model(np.array([[BOS_ID, 65]], np.int32)).numpy()[0, -1])[::-1][:len(targets)]
    assert sorted(top) == sorted(targets)                     # the precondition the tests rely on
    return model


@pytest.fixture(scope="module")
def session(exported):
    return session_model(exported)


# -- JSON-safe text ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def invalid_utf8_export(tmp_path_factory):
    from components.serving.export import write_serving_model
    return write_serving_model(biased_model(0xFF), CONTEXT, str(tmp_path_factory.mktemp("ff")),
                               tokenizer=ByteTokenizer(), max_new_tokens_limit=8,
                               signatures=("generate", "sample"))


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_text_is_valid_utf8_and_text_bytes_is_raw(invalid_utf8_export):
    """A model that only emits the lone byte 0xFF (never valid UTF-8): `text` replaces each by
    U+FFFD and serializes as JSON text, `text_bytes` keeps the bytes. Caught: returning the raw
    bytes as `text` (strict decoding fails), or dropping the invalid bytes."""
    out = SessionModel(invalid_utf8_export).run(
        "generate", prompt=np.array([b"ab", b"\xc3"], object), max_new_tokens=np.array([3, 1], np.int32))
    assert out["text_bytes"].tolist() == [b"\xff" * 3, b"\xff"]
    assert [t.decode("utf-8") for t in out["text"]] == ["\ufffd" * 3, "\ufffd"]
    json.loads(json.dumps({"text": [t.decode("utf-8") for t in out["text"]]}))


def test_sampled_text_is_always_utf8(loaded):
    """Random tiny weights at temperature 1.3 emit bytes >= 0x80 in most rows."""
    out = sample(loaded, ["def main("] * 8, 24, 1.3, list(range(8)))
    raw = out["text_bytes"].numpy().tolist()
    assert any(max(r, default=0) >= 0x80 for r in raw)
    for text, text_bytes in zip(out["text"].numpy().tolist(), raw):
        decoded = text.decode("utf-8")                         # strict: raises on invalid bytes
        try:
            assert decoded == text_bytes.decode("utf-8")       # valid rows are left as they are
        except UnicodeDecodeError:
            assert "\ufffd" in decoded


# -- sampling controls ------------------------------------------------------------------------


def reference_filter(logits, top_k, top_p):
    """numpy: ids kept by top-k then top-p (smallest set of the best ids reaching mass top_p)."""
    order = np.argsort(-logits, kind="stable")
    keep = order[:top_k] if top_k else order
    probs = np.exp(logits[keep] - logits[keep].max())
    probs /= probs.sum()
    mass_before = np.concatenate([[0.0], np.cumsum(probs)[:-1]])
    return set(keep[mass_before < top_p].tolist())


@pytest.mark.parametrize("top_k, top_p", [(0, 1.0), (1, 1.0), (5, 1.0), (0, 0.5), (0, 0.05), (7, 0.3), (50, 0.9)])
def test_top_k_top_p_against_numpy(top_k, top_p):
    from components.model.decoding import top_k_top_p
    logits = np.random.RandomState(top_k).normal(0, 2, (3, 40)).astype(np.float32)
    kept = top_k_top_p(tf.constant(logits), tf.fill([3], top_k), tf.fill([3], np.float32(top_p))).numpy()
    for row in range(3):
        assert set(np.flatnonzero(np.isfinite(kept[row])).tolist()) == reference_filter(logits[row], top_k, top_p)


def test_top_k_one_and_tiny_top_p_are_greedy(loaded):
    """Only the best id survives either filter, whatever the temperature and seed."""
    prompts = ["def main(", "import os", "x"]
    greedy = generate(loaded, prompts, 12)["text"].numpy().tolist()
    assert sample(loaded, prompts, 12, 5.0, [1, 2, 3], top_k=1)["text"].numpy().tolist() == greedy
    assert sample(loaded, prompts, 12, 5.0, [1, 2, 3], top_p=1e-6)["text"].numpy().tolist() == greedy
    assert sample(loaded, prompts, 12, 5.0, [1, 2, 3])["text"].numpy().tolist() != greedy


def test_stop_strings_end_a_row(loaded):
    """A row ends right after the token that completes any stop string (the text ends with it);
    other rows and stop strings that never occur change nothing."""
    full = sample(loaded, ["def main(", "import os"], 20, 0.0, 1)["text_bytes"].numpy().tolist()
    stop = full[0][6:8]
    cut = full[0][:full[0].index(stop) + len(stop)]
    out = sample(loaded, ["def main(", "import os"], 20, 0.0, 1, stop=[b"\x00never", stop])
    texts = out["text_bytes"].numpy().tolist()
    assert texts[0] == cut and out["new_tokens"].numpy()[0] == len(cut)
    assert texts[1] == (full[1][:full[1].index(stop) + len(stop)] if stop in full[1] else full[1])
    # Per row: row 0 has the two stop strings joined by U+001F, row 1 none ("").
    request = sample_request(["def main(", "def main("], 20, 0.0, 1)
    request["stop"] = np.array([b"\x00never\x1f" + stop, b""], object)
    per_row = loaded.signatures["sample"](**{k: tf.constant(v) for k, v in request.items()})
    assert per_row["text_bytes"].numpy().tolist() == [cut, full[0]]


def test_seed_reproducible_under_both_loaders_and_minus_one_is_random(exported, loaded, session):
    request = sample_request(["def main(", "import os"], 16, 1.0, [7, 8], top_k=50, top_p=0.95)
    first = session.run("sample", **request)["text"].tolist()
    assert session.run("sample", **request)["text"].tolist() == first
    again = loaded.signatures["sample"](**{k: tf.constant(v) for k, v in request.items()})
    assert again["text"].numpy().tolist() == first
    request["seed"] = np.array([-1, -7], np.int32)   # any negative seed is random, per row
    randoms = [session.run("sample", **request)["text"].tolist() for _ in range(3)]
    assert len({r[0] for r in randoms}) == 3 and len({r[1] for r in randoms}) == 3


def test_pad_and_bos_are_never_chosen():
    """A model whose best ids are PAD and BOS: greedy and sampling at any temperature still produce
    max_new_tokens real tokens. Caught: leaving PAD or BOS unmasked (greedy and temperature 1 pick
    them). A finite -1e9 mask divided by temperature 1e9 (-1) is only sometimes sampled here."""
    from components.serving.server import LanguageModelServer
    server = LanguageModelServer(biased_model(PAD_ID, BOS_ID), CONTEXT, 64,
                                 tokenizer=ByteTokenizer())
    fn = tf.function(lambda **kw: server.sample(**kw), autograph=False)
    for temperature in (0.0, 1.0, 1e9):
        request = sample_request(["a", "b", "c", "d"], 12, temperature, [1, 2, 3, 4])
        out = fn(**{k: tf.constant(v) for k, v in request.items()})
        assert out["new_tokens"].numpy().tolist() == [12] * 4, temperature


# -- score ----------------------------------------------------------------------------------------


def reference_score(session, prompt: bytes, continuation: bytes) -> float:
    """Python: [BOS] + prompt + continuation, last CONTEXT ids, token_logits, log-softmax summed
    over the continuation's positions."""
    ids = ([BOS_ID] + list(prompt) + list(continuation))[-CONTEXT:]
    logits = session.run("token_logits", input_ids=np.array([ids], np.int32))["logits"][0].astype(np.float64)
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    first = len(ids) - len(continuation)
    return float(sum(log_probs[j - 1, ids[j]] for j in range(first, len(ids))))


def test_score_equals_the_token_logits_reference(session):
    """Caught: an off-by-one between target and predicting position, or scoring prompt tokens."""
    pairs = [(b"def main(", b"args):"), (b"", b"import os"), (b"x" * 40, b"yz"),   # prompt cut
             (b"abc", b""), (b"", b"q" * (CONTEXT - 1))]
    out = session.run("score", prompt=np.array([p for p, _ in pairs], object),
                      continuation=np.array([c for _, c in pairs], object))
    assert out["tokens"].tolist() == [len(c) for _, c in pairs]
    expected = [reference_score(session, p, c) for p, c in pairs]
    np.testing.assert_allclose(out["log_prob"], expected, atol=1e-4)
    assert out["log_prob"][3] == 0.0


# -- cost ---------------------------------------------------------------------------------------


def test_huge_prompt_is_cut_before_it_is_split(loaded):
    """A 4 MB prompt gives the same logits as its last CONTEXT bytes (the window)."""
    huge = b"0123456789abcdef" * (1 << 18)
    out = loaded.signatures["serving_default"](prompt=tf.constant([huge, huge[-CONTEXT:]]))
    np.testing.assert_allclose(out["logits"].numpy()[0], out["logits"].numpy()[1], atol=1e-5)
    assert out["prompt_tokens"].numpy().tolist() == [CONTEXT, CONTEXT]


# -- warm-up ------------------------------------------------------------------------------------


def test_warmup_requests_replay_under_the_session_loader(exported, session):
    from components.serving import warmup
    requests = warmup.read_warmup_requests(exported)
    covered = {(name, next(iter(inputs.values())).shape[0]) for name, inputs in requests}
    assert covered == {(name, batch) for name in session.signatures
                       for batch in warmup.BATCHING["allowed_batch_sizes"]}
    for name, inputs in requests:
        out = session.run(name, **inputs)
        batch = next(iter(inputs.values())).shape[0]
        assert all(value.shape[0] == batch for value in out.values()), name


def test_unreadable_warmup_file_is_a_named_error(exported, tmp_path):
    import shutil
    from components.serving import warmup
    copy = str(tmp_path / "model")
    shutil.copytree(exported, copy)
    path = tmp_path / "model" / warmup.WARMUP_FILE
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(warmup.WarmupFileError, match="tf_serving_warmup_requests is not a readable"):
        warmup.read_warmup_requests(copy)
    path.unlink()
    with pytest.raises(warmup.WarmupFileError, match="no warm-up requests at"):
        warmup.read_warmup_requests(copy)


def test_push_of_a_model_with_an_unreadable_warmup_file_fails_naming_it(exported, tmp_path):
    """TF Serving (--enable_model_warmup) refuses to load a version whose warm-up file does not
    parse: the Pusher reads it back first, so the push fails naming the file and publishes
    nothing (no version, no models.config). Caught: a Pusher that copies without reading it."""
    import shutil
    from components.push import layout, push
    from components.serving import warmup
    copy = str(tmp_path / "model")
    shutil.copytree(exported, copy)
    path = tmp_path / "model" / warmup.WARMUP_FILE
    path.write_bytes(path.read_bytes()[:100])
    base = str(tmp_path / "serving" / "gpt")
    with pytest.raises(warmup.WarmupFileError, match=r"model/assets.extra/tf_serving_warmup_requests is not a readable"):
        push.push_model(copy, base)
    assert not (tmp_path / "serving").exists() or (
        layout.served_versions(base) == []
        and not os.path.exists(os.path.join(base, layout.MODELS_CONFIG)))
