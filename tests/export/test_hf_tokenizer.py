"""The tokenizer files of the Hugging Face layout, read back by the `tokenizers` library (the
loader transformers, vLLM and TGI use): its ids equal ours on a test corpus (Python source and
multilingual text: Latin, Cyrillic, CJK, Arabic, Devanagari, emoji, control bytes, runs of
spaces) for the byte tokenizer and SentencePiece BPE, exactly; for SentencePiece unigram, equal
except where two segmentations have the same total score (a tie the two Viterbi searches break
differently: both decode to the same text). Invalid UTF-8: `tokenizers` takes str only; ids that
spell invalid UTF-8 decode to U+FFFD, as our serving's `text` output."""

import json
import os

import numpy as np
import pytest
from tokenizers import Tokenizer

from components.serving.hf import SPM_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE
from components.serving.hf import tokenizer_files
from components.tokenizer import training
from components.tokenizer.byte_level import ByteTokenizer
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
from tests.support.texts import stdlib_texts
from tests.support.texts import corpus


def written(tokenizer, tmp_path) -> Tokenizer:
    """The tokenizer.json as written to disk, loaded by the `tokenizers` library."""
    path = os.path.join(str(tmp_path), TOKENIZER_FILE)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(tokenizer_files.tokenizer_json(tokenizer))
    return Tokenizer.from_file(path)


def test_byte_ids_equal_ours(tmp_path):
    ours, theirs = ByteTokenizer(), written(ByteTokenizer(), tmp_path)
    for text in corpus():
        assert theirs.encode(text).ids == ours.encode(text).tolist(), text
        assert theirs.decode(theirs.encode(text).ids) == text
    assert [theirs.token_to_id(t) for t in tokenizer_files.BYTE_SPECIALS] == [256, 257, 258]
    assert theirs.get_vocab_size() == ours.vocab_size


def test_invalid_utf8_is_stated(tmp_path):
    theirs = written(ByteTokenizer(), tmp_path)
    assert theirs.decode([0xFF, 0x41, 0xE6, 0x97]) == "\ufffdA\ufffd"   # a cut 3-byte sequence
    assert ByteTokenizer().decode([0xFF, 0x41, 0xE6, 0x97]) == b"\xffA\xe6\x97"
    with pytest.raises(Exception):      # a str that is not valid Unicode cannot be encoded there
        theirs.encode("\udcff")


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def sentencepiece(request):
    proto = training.train_sentencepiece(stdlib_texts(["json", "email"]), 400, request.param)
    return SentencePieceTokenizer(proto)   # no model_type: read from the file itself


def total_score(sp, ids) -> float:
    return float(sum(sp._sp.get_score(int(i)) for i in ids))


def test_sentencepiece_ids_equal_ours(sentencepiece, tmp_path):
    theirs, mismatched = written(sentencepiece, tmp_path), []
    for text in corpus():
        ours, got = sentencepiece.encode(text).tolist(), theirs.encode(text).ids
        assert theirs.decode(got) == sentencepiece.decode(ours).decode("utf-8"), text
        if got != ours:
            mismatched.append(text)
            assert tokenizer_files.model_type(sentencepiece.model_proto) == "unigram", text
            assert np.isclose(total_score(sentencepiece, got), total_score(sentencepiece, ours)), text
    assert len(mismatched) < len(corpus()) // 10


def test_the_model_type_is_read_from_the_file(sentencepiece, request):
    """TokenizerGen's tokenizers describe their type as "unknown" when loaded from a file."""
    trained_as = request.node.callspec.params["sentencepiece"]
    assert tokenizer_files.model_type(sentencepiece.model_proto) == trained_as
    model = json.loads(tokenizer_files.tokenizer_json(sentencepiece))["model"]["type"]
    assert model == {"bpe": "BPE", "unigram": "Unigram"}[trained_as]


def test_sentencepiece_specials_and_config(sentencepiece, tmp_path):
    from components.serving.hf.directory import write_hf_directory
    from tests.export.conftest import CONTEXT, tiny_model_config
    from components.model.gpt import build_model
    model = build_model(tiny_model_config("llama"), CONTEXT, vocab_size=sentencepiece.vocab_size)
    write_hf_directory(model, sentencepiece, str(tmp_path))
    assert open(os.path.join(str(tmp_path), SPM_FILE), "rb").read() == sentencepiece.model_proto
    theirs = Tokenizer.from_file(os.path.join(str(tmp_path), TOKENIZER_FILE))
    names = json.load(open(os.path.join(str(tmp_path), TOKENIZER_CONFIG_FILE)))
    for role in ("pad", "bos", "eos"):
        assert theirs.token_to_id(names[f"{role}_token"]) == getattr(sentencepiece, f"{role}_id")
    config = json.load(open(os.path.join(str(tmp_path), "config.json")))
    assert (config["pad_token_id"], config["bos_token_id"], config["eos_token_id"]) == (0, 2, 3)
    generation = json.load(open(os.path.join(str(tmp_path), "generation_config.json")))
    assert generation == {"bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 0,
                          "suppress_tokens": [0, 2], "do_sample": False}
