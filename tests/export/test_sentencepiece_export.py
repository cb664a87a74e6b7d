"""A model trained on SentencePiece ids, exported with the tokenizer embedded (tensorflow-text):
the TF1 session loader (TF Serving, `saved_model_cli run`) runs generate on raw text, the prompt
ids equal the Python tokenizer's, greedy text equals an independent Python decode of the Keras
model, and a missing or corrupt tokenizer file is an error naming the file."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from components.tokenizer import training
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
from tests.export.conftest import CONTEXT, SessionModel, tiny_model_config
from tests.support.texts import stdlib_texts

PROMPTS = ["def main():\n    return ", "import os\n", "caf\u00e9 \U0001f600 x"]


@pytest.fixture(scope="module")
def sp():
    proto = training.train_sentencepiece(stdlib_texts(["json", "email"]), 400, "bpe")
    return SentencePieceTokenizer(proto, model_type="bpe")


@pytest.fixture(scope="module")
def sp_model(sp):
    from components.model.gpt import build_model
    model = build_model(tiny_model_config("llama"), CONTEXT, vocab_size=sp.vocab_size)
    # Seed 6: its greedy text after "import os\n" has two multi-byte pieces to stop inside ("de",
    # twice, among "D", "[" and single bytes); most of seeds 0-9 give none, or one byte repeated,
    # which no stop-string test can use.
    rng = np.random.RandomState(6)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in model.get_weights()])
    return model


@pytest.fixture(scope="module")
def sp_variants(sp, sp_model, tmp_path_factory):
    """One export for the module: the float SavedModel (every signature, the tokenizer embedded)
    and its int8 and TFLite variants, as the Trainer writes them. (model folder, manifest)"""
    from components.serving import variants
    root = str(tmp_path_factory.mktemp("sp_export"))
    manifest = variants.export_variants(sp_model, tiny_model_config("llama"), CONTEXT, root,
                                        quantize=("int8", "tflite"), max_new_tokens_limit=32,
                                        tokenizer=sp)
    return root, manifest


@pytest.fixture(scope="module")
def sp_exported(sp_variants):
    """The float SavedModel of sp_variants."""
    from components.serving.variants import DIRS
    return os.path.join(sp_variants[0], DIRS["float"])


@pytest.fixture(scope="module")
def session(sp_exported):
    """sp_exported under the TF1 session loader, loaded once for the module (the tests only run
    signatures: nothing they do changes the graph or its variables)."""
    import tensorflow_text  # noqa: F401  (TF Serving links these ops in; Python must import them)
    return SessionModel(sp_exported)


def python_greedy_ids(model, tok, prompt: str, steps: int) -> list[int]:
    """Reference decode: no cache, no graph tokenizer; the window is the last CONTEXT ids
    (prompts here stay short enough that the window never slides). The new ids."""
    ids = [tok.bos_id] + tok.encode(prompt).tolist()
    new = []
    for _ in range(steps):
        logits = model(np.array([ids[-CONTEXT:]], np.int32), training=False).numpy()[0, -1]
        logits[[tok.pad_id, tok.bos_id]] = -np.inf   # never a continuation
        token = int(np.argmax(logits))
        new.append(token)
        if token == tok.eos_id:
            break
        ids.append(token)
    return new


def python_greedy(model, tok, prompt: str, steps: int) -> bytes:
    return tok.decode(python_greedy_ids(model, tok, prompt, steps))


@pytest.mark.slow   # trains SentencePiece and exports a model (fast tier: docs/benchmarks.md)
def test_generate_under_the_tf1_session_loader(sp, sp_model, sp_exported, session):
    steps = 6
    prompts = [p for p in PROMPTS if len(sp.encode(p)) + 1 + steps <= CONTEXT]
    out = session.run("generate", prompt=np.array([p.encode() for p in prompts], object),
                      max_new_tokens=np.full([len(prompts)], steps, np.int32))
    for i, prompt in enumerate(prompts):
        assert out["text_bytes"][i] == python_greedy(sp_model, sp, prompt, steps), prompt
    first = session.run("serving_default", prompt=np.array([p.encode() for p in PROMPTS], object))
    # [BOS] + the Python tokenizer's ids, cut to the context window.
    assert first["prompt_tokens"].tolist() == [min(len(sp.encode(p)) + 1, CONTEXT) for p in PROMPTS]
    assert first["logits"].shape == (len(PROMPTS), sp.vocab_size)
    with open(os.path.join(sp_exported, "assets.extra", "bigtrain_model.json")) as fh:
        meta = json.load(fh)
    assert meta["vocab_size"] == sp.vocab_size and meta["tokenizer"]["kind"] == "sentencepiece"


@pytest.mark.slow   # trains SentencePiece and exports a model (fast tier: docs/benchmarks.md)
def test_token_logits_rejects_ids_outside_the_vocabulary(sp, session):
    ok = session.run("token_logits", input_ids=np.array([[sp.bos_id, 5, 6]], np.int32))
    assert ok["logits"].shape == (1, 3, sp.vocab_size)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"input_ids must be < {sp.vocab_size}"):
        session.run("token_logits", input_ids=np.array([[sp.vocab_size]], np.int32))


@pytest.mark.slow   # trains SentencePiece and exports every variant (fast tier: docs/benchmarks.md)
def test_int8_and_tflite_variants_with_an_embedded_tokenizer(sp, sp_model, sp_variants):
    from components.serving import variants
    root, manifest = sp_variants
    assert list(manifest) == ["float", "int8", "tflite"]
    ids = np.array([[sp.bos_id] + sp.encode("import os").tolist()], np.int32)
    reference = sp_model(ids, training=False).numpy()
    for name in ("float", "int8", "tflite"):
        logits = np.asarray(variants.logits_fn(root, manifest[name])(ids))
        assert logits.shape == reference.shape
        assert np.abs(logits - reference).max() < (1e-4 if name == "float" else 0.5), name


def test_missing_or_corrupt_tokenizer_at_export_names_the_file(sp, tmp_path):
    from components.tokenizer.base import TokenizerFileError
    from components.training.run_fn import examples_tokenizer
    from components.config import build_config
    config = build_config("tiny", overrides=["data.tokenizer=sentencepiece",
                                             f"data.vocab_size={sp.vocab_size}"])
    examples = tmp_path / "examples"
    train_files = [str(examples / "Split-train" / "*")]
    with pytest.raises(TokenizerFileError, match=r"tokenizer/bigtrain_tokenizer\.json does not exist"):
        examples_tokenizer(train_files, config)
    sp.save(str(examples / "tokenizer"))
    assert examples_tokenizer(train_files, config).vocab_size == sp.vocab_size
    (examples / "tokenizer" / "tokenizer.model").write_bytes(b"not a model")
    with pytest.raises(TokenizerFileError, match=r"tokenizer/tokenizer\.model"):
        examples_tokenizer(train_files, config)
    other = build_config("tiny", overrides=["data.tokenizer=sentencepiece", "data.vocab_size=999"])
    sp.save(str(examples / "tokenizer"))
    with pytest.raises(ValueError, match="the config expects"):
        examples_tokenizer(train_files, other)
    # Byte-level examples carry no tokenizer: the byte default needs no file.
    assert examples_tokenizer([str(tmp_path / "bytes" / "Split-train" / "*")],
                              build_config("tiny")).kind == "bytes"


@pytest.mark.slow   # trains SentencePiece and exports a model (fast tier: docs/benchmarks.md)
def test_warmup_replays_and_score_matches_python(sp, sp_model, sp_exported, session):
    """With tensorflow-text ops: every warm-up request (every signature, every padded batch size,
    sample with a stop string, score) runs under the session loader, and score equals a Python
    reference built from the Python tokenizer's ids and the Keras model."""
    from components.serving.warmup import read_warmup_requests
    for name, inputs in read_warmup_requests(sp_exported):
        out = session.run(name, **inputs)
        assert all(v.shape[0] == next(iter(inputs.values())).shape[0] for v in out.values()), name
    prompt, continuation = "import os\n", "def main():"
    out = session.run("score", prompt=np.array([prompt.encode()], object),
                      continuation=np.array([continuation.encode()], object))
    cont = sp.encode(continuation).tolist()
    ids = ([sp.bos_id] + sp.encode(prompt).tolist() + cont)[-CONTEXT:]
    logits = sp_model(np.array([ids], np.int32), training=False).numpy()[0].astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = sum(log_probs[j - 1, ids[j]] for j in range(len(ids) - len(cont), len(ids)))
    assert out["tokens"].tolist() == [len(cont)]
    np.testing.assert_allclose(out["log_prob"], [expected], atol=1e-4)


@pytest.mark.slow   # trains SentencePiece and exports a model (fast tier: docs/benchmarks.md)
def test_stop_string_ends_the_row_at_the_piece_that_completes_it(sp, sp_model, sp_exported, session):
    """Multi-byte pieces: a stop string that starts in one piece and ends inside a later one
    stops the row after that later piece, whole. Python reference: the greedy ids' piece bytes
    (what each id adds to the text), the first prefix of pieces whose text contains the stop
    string. Caught: matching only at the text's very end (the stop string ends mid-piece), or
    cutting the piece that completes it."""
    from components.serving.stops import piece_bytes
    pieces = piece_bytes(sp)
    prompt = "import os\n"
    steps = CONTEXT - 1 - len(sp.encode(prompt))                 # the window never slides
    ids = python_greedy_ids(sp_model, sp, prompt, steps)
    stream = [pieces[i] for i in ids]
    # The stop string: the 2 bytes before a multi-byte piece and its first byte.
    candidates = [k for k in range(1, len(ids)) if len(stream[k]) >= 2 and len(b"".join(stream[:k])) >= 2]
    assert candidates, f"the fixture model's greedy pieces have no multi-byte piece to stop in: {stream}"
    k = candidates[0]
    end = len(b"".join(stream[:k])) + 1
    stop = b"".join(stream)[end - 3:end]
    assert b"\x1f" not in stop
    first = next(j for j in range(len(ids)) if stop in b"".join(stream[:j + 1]))   # reference
    special = {sp.pad_id, sp.bos_id, sp.eos_id}

    def run(stop_row):
        return session.run("sample", prompt=np.array([prompt.encode()], object),
                           max_new_tokens=np.array([steps], np.int32), temperature=np.zeros([1], np.float32),
                           top_k=np.zeros([1], np.int32), top_p=np.ones([1], np.float32),
                           seed=np.ones([1], np.int32), stop=np.array([stop_row], object))
    assert run(b"")["text_bytes"][0] == sp.decode(ids)            # unstopped: the reference ids
    out = run(b"\x00never\x1f" + stop)
    assert out["text_bytes"][0] == sp.decode(ids[:first + 1]), (stop, stream)
    assert out["new_tokens"][0] == sum(i not in special for i in ids[:first + 1])
    assert first >= k and len(stream[first]) >= 2                  # it ended inside a multi-byte piece
