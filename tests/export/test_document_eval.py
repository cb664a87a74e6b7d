"""Whole-document evaluation through the exported model's token_logits signature equals an
independent reference: Hugging Face's strided-perplexity loop ("perplexity of fixed-length
models"), one window per signature call, log-softmax in float64 numpy.

Mutations these catch (each fails test_strided_nats_equal_the_plain_loop): a window that scores
targets an earlier window scored (stride used as the scored count), windows advanced by
stride_context instead of context - stride_context, the EOS target dropped, the padding of a
short last window scored, and a window's nats credited to the next document (owner off by one)."""

import numpy as np
import pytest

from components.evaluation import documents
from components.tokenizer.byte_level import ByteTokenizer
from tests.export.conftest import CONTEXT

TOKENIZER = ByteTokenizer()
# float32 cross entropy per target against the float64 reference: within a few ulps of
# |logit| + log V (logits here are O(10) under N(0, 0.3) weights): 64 u x 20 bounds it with room.
PER_TARGET_BOUND = 64 * 2**-24 * 20


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    logits = logits.astype(np.float64)
    peak = logits.max(-1, keepdims=True)
    return logits - peak - np.log(np.exp(logits - peak).sum(-1, keepdims=True))


def plain_loop_nats(signature, ids: np.ndarray, context: int, stride_context: int) -> tuple[float, int]:
    """The reference: [BOS] ids [EOS]; windows begin every context - stride_context ids, hold at
    most context + 1 ids, and score only the targets past the previous window's end."""
    stream = np.concatenate([[TOKENIZER.bos_id], ids, [TOKENIZER.eos_id]]).astype(np.int32)
    stride, previous_end, nats, count = context - stride_context, 1, 0.0, 0
    for begin in range(0, len(stream) - 1, stride):
        end = min(begin + context + 1, len(stream))
        window = stream[begin:end]
        log_probs = log_softmax64(signature(input_ids=window[None, :-1])["logits"].numpy()[0])
        for position in range(previous_end, end):        # targets not scored by an earlier window
            nats -= log_probs[position - begin - 1, stream[position]]
            count += 1
        previous_end = end
        if end == len(stream):
            break
    return nats, count


DOCUMENTS = [b"def f(x):\n    return x + 1\n" * 3, b"ab", b"import os\n" + bytes(range(32, 127)),
             b"x" * (CONTEXT + 1), b"y" * (2 * CONTEXT)]


@pytest.mark.parametrize("stride_context", [0, 1, CONTEXT // 2, CONTEXT - 1])
def test_strided_nats_equal_the_plain_loop(loaded, stride_context):
    signature = loaded.signatures["token_logits"]
    ids = [TOKENIZER.encode(d) for d in DOCUMENTS]
    nats, counts = documents.document_nats(
        lambda x: signature(input_ids=x)["logits"], ids, context=CONTEXT,
        stride_context=stride_context, batch_size=3, bos_id=TOKENIZER.bos_id,
        eos_id=TOKENIZER.eos_id, pad_id=TOKENIZER.pad_id)
    for i, doc in enumerate(ids):
        want_nats, want_count = plain_loop_nats(signature, doc, CONTEXT, stride_context)
        assert counts[i] == want_count == len(doc) + 1          # every id and EOS, once
        assert nats[i] == pytest.approx(want_nats, abs=PER_TARGET_BOUND * want_count)


def test_a_document_inside_one_window_is_one_call(loaded):
    """A short document: one window, all of its targets; the figure is the one call's loss."""
    signature = loaded.signatures["token_logits"]
    ids = TOKENIZER.encode(b"short text")
    stream = np.concatenate([[TOKENIZER.bos_id], ids, [TOKENIZER.eos_id]]).astype(np.int32)
    log_probs = log_softmax64(signature(input_ids=stream[None, :-1])["logits"].numpy()[0])
    want = -log_probs[np.arange(len(stream) - 1), stream[1:]].sum()
    figures = documents.document_figures(lambda x: signature(input_ids=x)["logits"], [ids],
                                         TOKENIZER, context=CONTEXT, stride_context=-1,
                                         batch_size=4)
    assert figures["document_tokens"] == len(ids) + 1 and figures["document_bytes"] == 10
    assert figures["document_stride_context"] == CONTEXT // 2
    bound = PER_TARGET_BOUND * (len(ids) + 1) / np.log(2) / 10
    assert figures["document_bits_per_byte"] == pytest.approx(want / np.log(2) / 10, abs=bound)


def test_a_held_out_set_is_scored_like_the_plain_loop_beside_its_compressors(loaded, tmp_path):
    """eval.sets: a .jsonl file (two records) and a text file, all three documents within the
    cap: the model's bits/byte is the plain loop's over the same documents, the compressors
    zlib / lzma of each text alone. Catches a set's JSON record read as one raw text, another
    set's documents mixed in, and the figures keyed under the wrong set name."""
    import json
    import lzma
    import zlib
    from components.config import build_config
    from components.evaluation import held_out_sets
    records = [{"text": "def add(a, b):\n    return a + b\n"}, {"text": "x = [i * i for i in range(9)]\n"}]
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "set" / "b.py").write_bytes(b"print('held out')\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "c.py").write_bytes(b"not this one\n")
    eval_config = build_config("tiny", overrides=[
        f"eval.sets=[{{name: mine, input: '{tmp_path}/set/*'}}, "
        f"{{name: other, input: '{tmp_path}/other/*'}}]", "eval.batch_size=4"]).eval
    signature = loaded.signatures["token_logits"]
    measured = held_out_sets.measure_sets(lambda x: signature(input_ids=x)["logits"], CONTEXT,
                                          eval_config, TOKENIZER)
    texts = [r["text"].encode() for r in records] + [b"print('held out')\n"]
    nats = sum(plain_loop_nats(signature, TOKENIZER.encode(t), CONTEXT, CONTEXT // 2)[0] for t in texts)
    size = sum(len(t) for t in texts)
    mine = measured["mine"]
    assert mine["document_count"] == 3 and mine["document_bytes"] == size
    bound = PER_TARGET_BOUND * mine["document_tokens"] / np.log(2) / size
    assert mine["document_bits_per_byte"] == pytest.approx(nats / np.log(2) / size, abs=bound)
    assert mine["document_lzma9_bits_per_byte"] == 8 * sum(len(lzma.compress(t, preset=9)) for t in texts) / size
    assert mine["document_zlib9_bits_per_byte"] == 8 * sum(len(zlib.compress(t, 9)) for t in texts) / size
    assert measured["other"]["document_bytes"] == len(b"not this one\n")
    flat = held_out_sets.flat_properties(measured)
    assert flat["heldout_mine_document_bits_per_byte"] == mine["document_bits_per_byte"]
