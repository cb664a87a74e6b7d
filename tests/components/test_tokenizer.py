"""The tokenizer seam: byte and SentencePiece tokenizers in Python and in the graph, training
errors, the sample rule, model-file errors, bits per byte, and a SentencePiece SavedModel under
the TF1 session loader (what TF Serving and `saved_model_cli run` use)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from components.text_example_gen.packing import Packer
from components.corpus.documents import content_key
from components.tokenizer import artifact, base, metrics, sampling, training
from components.tokenizer.base import TokenizerFileError
from components.tokenizer.byte_level import ByteTokenizer
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
from components.tokenizer.training import TokenizerTrainingError
from benchmarks.support.single_process import sample_documents
from tests.support.texts import stdlib_texts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Strings that break careless tokenizers: NFKC-foldable, combining, non-BMP, controls, NUL, a
# BOM, text that looks like SentencePiece's own pieces, leading/trailing/double whitespace.
TRICKY = ["", " ", "  lead", "trail  ", "a  b\t\tc", "\n\n", "\r\n", "caf\u00e9 e\u0301",
          "\uff21\uff22 \ufb01", "\U0001f600\U0010ffff", "\x00\x01\x7f", "\ufeffbom", "\ufffd",
          "<0xFF> <unk> <s> </s> <pad>", "\u00c3\u00a9 (mojibake)", "\u200b\u2028\u2029",
          "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u4e2d\u6587 \ud55c\uad6d\uc5b4"]


@pytest.fixture(scope="module")
def sp():
    """A 600-piece unigram model trained on two stdlib packages (about 1.5 s)."""
    proto = training.train_sentencepiece(stdlib_texts(["json", "email"]), 600, "unigram")
    return SentencePieceTokenizer(proto, model_type="unigram")


@pytest.fixture(scope="module")
def sp_bpe():
    proto = training.train_sentencepiece(stdlib_texts(["json", "email"]), 600, "bpe")
    return SentencePieceTokenizer(proto, model_type="bpe")


def random_text(rng, n):
    """n random characters from ranges that matter: ASCII, Latin-1, CJK, emoji, controls."""
    ranges = [(0x00, 0x7F), (0x80, 0x24F), (0x4E00, 0x4FFF), (0x1F300, 0x1F64F), (0x2000, 0x206F)]
    chars = []
    for _ in range(n):
        lo, hi = ranges[rng.integers(len(ranges))]
        c = int(rng.integers(lo, hi + 1))
        chars.append(chr(c if c != 0x2581 else 0x20))  # U+2581: the documented exception
    return "".join(chars)


# ---------------------------------------------------------------- byte tokenizer


def test_byte_tokenizer_is_the_data_stage_encoder():
    """The tokenizer and the data stage's packer use the one byte encoder: same ids, and the
    packed stream is [BOS] bytes [EOS] (reference: the bytes themselves)."""
    tok = ByteTokenizer()
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.vocab_size) == (256, 257, 258, 259)
    data = bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8))
    np.testing.assert_array_equal(tok.encode(data), list(data))
    np.testing.assert_array_equal(tok.document_ids(data), [257] + list(data) + [258])
    packer = Packer(len(data) + 1)
    packer.add(data)
    np.testing.assert_array_equal(packer.finish()[0], tok.document_ids(data)[:len(data) + 2])


def test_byte_round_trip_of_arbitrary_bytes():
    tok = ByteTokenizer()
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 4096):
        data = bytes(rng.integers(0, 256, n, dtype=np.uint8))  # mostly invalid UTF-8
        assert tok.decode(tok.encode(data)) == data
        assert tok.decode(tok.document_ids(data)) == data      # specials dropped
    for text in TRICKY:
        assert tok.decode(tok.encode(text)) == text.encode("utf-8")


# ---------------------------------------------------------------- SentencePiece in Python


def test_sentencepiece_layout(sp):
    assert sp.vocab_size == 600
    assert (sp.pad_id, sp.bos_id, sp.eos_id) == (0, 2, 3)
    ids = sp.document_ids("def f(x):\n    return x\n")
    assert ids[0] == sp.bos_id and ids[-1] == sp.eos_id and len(ids) < 20  # subwords, not bytes
    assert ids.dtype == np.int64 and ((ids >= 0) & (ids < sp.vocab_size)).all()


def test_sentencepiece_round_trip(sp):
    for text in TRICKY + stdlib_texts(["json"], limit=3):
        assert sp.decode(sp.encode(text)) == text.encode("utf-8"), repr(text)
        assert sp.decode(sp.document_ids(text.encode("utf-8"))) == text.encode("utf-8")
    rng = np.random.default_rng(2)
    for _ in range(200):
        text = random_text(rng, int(rng.integers(1, 60)))
        assert sp.decode(sp.encode(text)) == text.encode("utf-8"), repr(text)


def test_u2581_is_the_one_documented_exception(sp):
    # SentencePiece spells the space as U+2581 and decodes every U+2581 as a space
    # (docs/tokenizers.md).
    assert sp.decode(sp.encode("a\u2581b")) == b"a b"


def test_sentencepiece_rejects_invalid_utf8(sp):
    with pytest.raises(ValueError, match="not valid UTF-8 at byte 3"):
        sp.encode(b"abc\xff")


def test_training_is_deterministic():
    texts = stdlib_texts(["json"])
    assert (training.train_sentencepiece(texts, 400, "bpe")
            == training.train_sentencepiece(texts, 400, "bpe"))


def test_bpe_model_round_trips():
    tok = SentencePieceTokenizer(training.train_sentencepiece(stdlib_texts(["json"]), 400, "bpe"))
    for text in TRICKY:
        assert tok.decode(tok.encode(text)) == text.encode("utf-8")


# ---------------------------------------------------------------- training errors


def test_vocab_size_below_byte_fallback_minimum():
    with pytest.raises(TokenizerTrainingError, match=r"data\.vocab_size=200 is below the "
                       r"byte-fallback minimum: 256 byte pieces \+ 4 special ids"):
        training.train_sentencepiece(["some text"], 200)
    # Above 261 but below 260 + the characters the sample needs: sentencepiece's own bound.
    with pytest.raises(TokenizerTrainingError, match=r"data\.vocab_size=270 is below the "
                       r"byte-fallback minimum for this sample: .* raise data\.vocab_size to at "
                       r"least \d+"):
        training.train_sentencepiece(stdlib_texts(["json"]), 270)


def test_vocab_size_larger_than_the_sample_supports():
    with pytest.raises(TokenizerTrainingError, match=r"data\.vocab_size=5000 is larger than the "
                       r"training sample supports \(at most \d+ pieces .*raise "
                       r"data\.tokenizer_sample_bytes"):
        training.train_sentencepiece(["def f(x): return x + 1\n" * 20], 5000)


def test_sample_with_no_text():
    for texts in ([], ["", "   \n\n"]):
        with pytest.raises(TokenizerTrainingError, match="sample has no text"):
            training.train_sentencepiece(texts, 600)
    with pytest.raises(TokenizerTrainingError, match="data.tokenizer_model_type"):
        training.train_sentencepiece(["text"], 600, "wordpiece")


# ---------------------------------------------------------------- the sample rule


def test_sample_is_the_smallest_keys_within_the_budget():
    """Catches: a sample that depends on arrival order or on document ids (the key is the
    content's), a budget not filled exactly, and duplicates counted twice under dedup."""
    rng = np.random.default_rng(3)
    docs = [(f"doc{i}.py", f"{i} " + "x" * int(rng.integers(0, 300))) for i in range(200)]
    budget = 5000
    sample = sample_documents(docs, budget)
    # Independent reference: sort by key, take whole documents while they fit, cut the next.
    reference, total = [], 0
    for doc_id, text in sorted(docs, key=lambda d: sampling.sample_key(content_key(d[1].encode()))):
        take = text[:budget - total]
        if take:
            reference.append(take)
            total += len(take)
        if total >= budget:
            break
    assert sample.texts == reference and sample.bytes == budget
    assert sample.documents_seen == 200 and sample.bytes_seen == sum(len(t) for _, t in docs)
    shuffled = [docs[i] for i in rng.permutation(len(docs))]
    assert sample_documents(shuffled, budget).texts == sample.texts  # order-free
    # A budget above the corpus takes every non-empty document whole.
    assert sample_documents(docs, 10**9).bytes == sample.bytes_seen
    # dedup: a copy (equal up to CRLF and surrounding whitespace) is sampled once, first copy's id.
    copies = docs + [("copy.py", "\n" + docs[7][1].replace("\n", "\r\n") + "  ")]
    deduped = sample_documents(copies, 10**9, dedup=True)
    assert deduped.texts == sample_documents(docs, 10**9).texts
    assert "copy.py" not in deduped.document_ids
    assert "copy.py" in sample_documents(copies, 10**9).document_ids


def test_merged_accumulators_give_the_one_pass_sample():
    """The Beam combiner's contract: any split of the input into accumulators, merged in any order
    and compacted at any time, gives the sample of one pass (catches a compaction that drops what
    a later merge needs, or a later copy replacing the first)."""
    rng = np.random.default_rng(5)
    texts = [("y" * int(rng.integers(1, 400))).encode() for _ in range(300)]
    texts += texts[:40]                                   # exact copies, later in reading order
    candidates = [sampling.candidate(f"d{i}", t, (i // 50, i % 50)) for i, t in enumerate(texts)]
    one_pass = sampling.SampleAccumulator(3000, dedup=True)
    for c in candidates:
        one_pass.add(c)
    for parts in (2, 7, 31):
        order = rng.permutation(len(candidates))
        accumulators = [sampling.SampleAccumulator(3000, dedup=True) for _ in range(parts)]
        for n, i in enumerate(order):
            accumulators[n % parts].add(candidates[i])
            if n % 13 == 0:
                accumulators[n % parts].compact()
        merged = accumulators[-1]
        for other in accumulators[:-1]:
            merged.merge(other)
        assert merged.sample() == one_pass.sample(), parts


def test_long_lines_are_cut_not_skipped():
    line = "\u00e9" * 5000 + "x" * 7000                     # 17,000 bytes, no newline
    pieces = list(training.training_sentences([line + "\n\nshort"]))
    assert "".join(pieces[:-1]) == line and pieces[-1] == "short"
    assert max(len(p.encode("utf-8")) for p in pieces) <= training.MAX_SENTENCE_BYTES


def test_sample_cuts_on_character_boundaries():
    sample = sample_documents([("a", "\u00e9" * 100)], 51)  # 2-byte characters
    assert sample.texts == ["\u00e9" * 25] and sample.bytes == 50


# ---------------------------------------------------------------- files


def saved_figures(directory) -> dict:
    """The figures a saved tokenizer's description file records (the run report reads them)."""
    return json.loads((directory / base.DESCRIPTION_FILE).read_text(encoding="utf-8"))["figures"]


def test_save_and_load(sp, tmp_path):
    sp.save(str(tmp_path / "sp"), {"bytes_per_token": 2.5})
    loaded = artifact.load(str(tmp_path / "sp"))
    assert isinstance(loaded, SentencePieceTokenizer) and loaded.vocab_size == sp.vocab_size
    text = stdlib_texts(["json"], limit=1)[0]
    np.testing.assert_array_equal(loaded.encode(text), sp.encode(text))
    assert saved_figures(tmp_path / "sp") == {"bytes_per_token": 2.5}
    vocab = (tmp_path / "sp" / base.VOCAB_FILE).read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 600 and vocab[0].startswith("<pad>\t")
    ByteTokenizer().save(str(tmp_path / "bytes"))
    assert isinstance(artifact.load(str(tmp_path / "bytes")), ByteTokenizer)


def test_a_tokenizer_saved_before_the_rename_still_loads(sp, tmp_path):
    """Artifacts written before the description was renamed hold it as LEGACY_DESCRIPTION_FILE
    (the name Hugging Face gives its own tokenizer file): load reads it; a new save writes only
    DESCRIPTION_FILE, so the two formats never share a name in one folder."""
    assert base.DESCRIPTION_FILE != base.LEGACY_DESCRIPTION_FILE
    sp.save(str(tmp_path / "sp"))
    assert not (tmp_path / "sp" / base.LEGACY_DESCRIPTION_FILE).exists()
    os.rename(tmp_path / "sp" / base.DESCRIPTION_FILE, tmp_path / "sp" / base.LEGACY_DESCRIPTION_FILE)
    loaded = artifact.load(str(tmp_path / "sp"))
    assert isinstance(loaded, SentencePieceTokenizer) and loaded.model_proto == sp.model_proto
    ByteTokenizer().save(str(tmp_path / "bytes"))
    os.rename(tmp_path / "bytes" / base.DESCRIPTION_FILE, tmp_path / "bytes" / base.LEGACY_DESCRIPTION_FILE)
    assert isinstance(artifact.load(str(tmp_path / "bytes")), ByteTokenizer)


def test_missing_and_corrupt_files_name_the_file(sp, tmp_path):
    model = tmp_path / "tokenizer.model"
    with pytest.raises(TokenizerFileError, match=f"{model} does not exist"):
        SentencePieceTokenizer.from_file(str(model))
    model.write_bytes(b"")
    with pytest.raises(TokenizerFileError, match=f"{model} is empty"):
        SentencePieceTokenizer.from_file(str(model))
    model.write_bytes(b"\x0a\x03not a model proto" * 3)
    with pytest.raises(TokenizerFileError, match=f"{model}: not a SentencePiece model"):
        SentencePieceTokenizer.from_file(str(model))
    model.write_bytes(sp.model_proto[: len(sp.model_proto) // 2])  # truncated
    with pytest.raises(TokenizerFileError, match=f"{model}: not a SentencePiece model"):
        SentencePieceTokenizer.from_file(str(model))
    with pytest.raises(TokenizerFileError, match=f"{tmp_path / 'nowhere' / base.DESCRIPTION_FILE} "
                       "does not exist"):
        artifact.load(str(tmp_path / "nowhere"))
    (tmp_path / base.DESCRIPTION_FILE).write_text('{"kind": "wordpiece"}')
    with pytest.raises(TokenizerFileError, match="kind 'wordpiece' is not one of"):
        artifact.load(str(tmp_path))


def test_models_that_cannot_round_trip_are_refused():
    import io
    import sentencepiece as spm

    def train(**options):
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=training.training_sentences(stdlib_texts(["json"], limit=2)),
            model_writer=out,
            vocab_size=400, pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2, **options)
        return out.getvalue()

    with pytest.raises(TokenizerFileError, match="without byte_fallback"):
        SentencePieceTokenizer(train(normalization_rule_name="identity"), source="nofallback.model")
    with pytest.raises(TokenizerFileError, match="nfkc.model: .*does not reproduce its input"):
        SentencePieceTokenizer(train(byte_fallback=True), source="nfkc.model")  # NFKC, dummy prefix


# ---------------------------------------------------------------- bits per byte


def test_bits_per_byte_against_a_hand_computation():
    # Three tokens covering 3 bytes with probabilities 1/2, 1/4, 1/8: 1 + 2 + 3 = 6 bits.
    nats = math.log(2) + math.log(4) + math.log(8)
    assert metrics.bits_per_byte(nats, 3) == pytest.approx(2.0)
    # A uniform guess over 256 byte values costs 8 bits per byte whatever the tokenization:
    # 100 bytes as 25 four-byte tokens, each with probability 256**-4.
    assert metrics.bits_per_byte(4 * math.log(256) * 25, 100) == pytest.approx(8.0)
    # (Dividing by tokens instead of bytes would give 32; forgetting ln 2 would give 5.55.)
    with pytest.raises(ValueError, match="raw_bytes > 0"):
        metrics.bits_per_byte(1.0, 0)


# ---------------------------------------------------------------- in the graph


def test_in_graph_ids_equal_python_ids_on_stdlib_text(sp, sp_bpe):
    """Catches a Python sentencepiece whose segmentation differs from the kernels in
    tensorflow-text: with sentencepiece 0.2.x, 29 of these 38 files differ (ties between
    equal-score splits of runs of spaces are broken the other way); hence the 0.1.99 pin."""
    import tensorflow as tf
    texts = TRICKY + stdlib_texts(["collections", "asyncio", "html"])  # not in the training sample
    for tok in (sp, sp_bpe, ByteTokenizer()):
        graph = tok.in_graph()
        ids = graph.tokenize(tf.constant([t.encode("utf-8") for t in texts]))
        for text, row in zip(texts, ids.to_list()):
            assert row == tok.encode(text).tolist(), (tok.kind, text[:40])
        decoded = graph.detokenize(ids).numpy().tolist()
        assert decoded == [t.encode("utf-8") for t in texts]
        # Specials and out-of-range ids are dropped, as in Python.
        specials = tf.ragged.constant([[tok.bos_id, *tok.encode("ok").tolist(), tok.eos_id,
                                        tok.pad_id, tok.vocab_size + 5, -1]], dtype=tf.int32)
        assert graph.detokenize(specials).numpy().tolist() == [b"ok"]


def export_tokenizer(tok, export_dir):
    """A tiny serving module: text in, ids and round-tripped text out, written through Keras'
    ExportArchive (what the export stage uses)."""
    import keras
    import tensorflow as tf

    graph = tok.in_graph()

    def encode(text):
        ids = graph.tokenize(text)
        return {"ids": ids.to_tensor(default_value=-1), "lengths": ids.row_lengths(),
                "text": graph.detokenize(ids)}

    def copy_loop(prompt, max_new_tokens):
        """Like a generate signature: tokenize one prompt, grow an id vector in a while_loop (here
        copying the prompt's ids), detokenize inside the same graph."""
        ids = graph.tokenize(prompt[None])[0]                            # int32 [L]
        out = tf.zeros([0], tf.int32)

        def body(i, out):
            return i + 1, tf.concat([out, ids[i:i + 1]], 0)

        _, out = tf.while_loop(lambda i, out: i < tf.minimum(max_new_tokens, tf.size(ids)), body,
                               [tf.constant(0), out],
                               shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
        return {"text": graph.detokenize(tf.RaggedTensor.from_tensor(out[None]))[0]}

    archive = keras.export.ExportArchive()
    archive.track(graph)
    archive.add_endpoint("serving_default", encode,
                         input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    archive.add_endpoint("copy_loop", copy_loop,
                         input_signature=[tf.TensorSpec([], tf.string, name="prompt"),
                                          tf.TensorSpec([], tf.int32, name="max_new_tokens")])
    archive.write_out(export_dir, verbose=False)


def test_sentencepiece_saved_model_under_the_tf1_session_loader(sp, tmp_path):
    import tensorflow as tf
    export_dir = str(tmp_path / "export")
    export_tokenizer(sp, export_dir)
    texts = ["def main():\n    return 0\n", "caf\u00e9 \U0001f600"]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
        signature = meta_graph.signature_def["serving_default"]
        out = session.run({k: v.name for k, v in signature.outputs.items()},
                          {signature.inputs["text"].name: [t.encode() for t in texts]})
        loop = meta_graph.signature_def["copy_loop"]
        copied = session.run(loop.outputs["text"].name,
                             {loop.inputs["prompt"].name: texts[0].encode(),
                              loop.inputs["max_new_tokens"].name: 1000})
    for i, text in enumerate(texts):
        assert out["ids"][i, :out["lengths"][i]].tolist() == sp.encode(text).tolist()
        assert out["text"][i] == text.encode("utf-8")
    assert copied == texts[0].encode()


@pytest.mark.slow
def test_saved_model_cli_run_with_tensorflow_text_registered(sp, tmp_path):
    """`saved_model_cli run` in a fresh process, through our wrapper (stock saved_model_cli
    does not import tensorflow_text and fails with "Op type not registered 'SentencepieceOp'")."""
    export_dir = str(tmp_path / "export")
    export_tokenizer(sp, export_dir)
    result = subprocess.run(
        [sys.executable, "-m", "components.tokenizer.saved_model_cli", "run", "--dir", export_dir,
         "--tag_set", "serve", "--signature_def", "serving_default",
         "--input_exprs", "text=['def f(): pass']"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "def f(): pass" in result.stdout
    assert str(sp.encode("def f(): pass").tolist()[:3])[1:-1].replace(",", "") in \
        " ".join(result.stdout.split())


# ---------------------------------------------------------------- bytes under ids, Beam workers


def test_token_byte_lengths_add_up_to_the_raw_bytes(sp, sp_bpe):
    texts = TRICKY + stdlib_texts(["html", "json"])
    for tok in (sp, sp_bpe, ByteTokenizer()):
        lengths = tok.token_byte_lengths()
        assert lengths.shape == (tok.vocab_size,)
        assert lengths[[tok.pad_id, tok.bos_id, tok.eos_id]].tolist() == [0, 0, 0]
        for text in texts:
            ids = tok.document_ids(text)
            assert lengths[ids].sum() == len(text.encode("utf-8")), (tok.kind, text[:30])


def test_tokenizer_pickles_for_beam_workers(sp):
    import pickle
    clone = pickle.loads(pickle.dumps(sp))
    assert clone.encode("def f():\n").tolist() == sp.encode("def f():\n").tolist()
