"""Whole-document evaluation through the exported model's token_logits signature equals an
independent reference: Hugging Face's strided-perplexity loop ("perplexity of fixed-length
models"), one window per signature call, log-softmax in float64 numpy.

Mutations these catch (each fails test_strided_nats_equal_the_plain_loop): a window that scores
targets an earlier window scored (stride used as the scored count), windows advanced by
stride_context instead of context - stride_context, the EOS target dropped, the padding of a
short last window scored, and a window's nats credited to the next document (owner off by one)."""

import numpy as np
import pytest
import tensorflow as tf

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


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
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


# One eligible line each, after a 4-byte first line: [BOS] + prompt + MAX_NEW ids fit the tiny
# export's 16 positions, so `sample` never slides its cache past the window (past it a llama
# model's positions count on: no recomputation over token_logits could equal it).
SHORT_CODE = [b"a=1\nx = y + z\n", b"b=2\nq = p * 2\n", b"c=3\nfor k in ab:\n",
              b"d=4\nwhile go:\n", b"e=5\nreturn val\n"]
MAX_NEW = CONTEXT - 1 - 4 - 2
CODE = [b"import os\n\ndef area(w, h):\n    a = w * h\n    return a\n\ndef per(w, h):\n"
        b"    p = 2 * (w + h)\n    return p\n",
        b"class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
        b"for i in range(9):\n    print(i * i)\ntotal = sum(range(9))\nprint(total)\n"]


def test_task_items_are_deterministic_and_well_formed():
    """The same texts give the same items (any run, any order of calls); each prompt is the
    document before the line plus its indentation; the target is one of the 4 options at
    `answer`; distractors come from other documents and differ from the target."""
    from components.evaluation import tasks
    first = tasks.build_items(CODE, 6, 0, 40)
    assert first == tasks.build_items(list(CODE), 6, 0, 40) and len(first) == 6
    assert first != tasks.build_items(CODE, 6, 1, 40)                     # the seed matters
    assert len({item.answer for item in first}) > 1          # the true line is not always first
    for item in first:
        (doc,) = [d for d in CODE if d.startswith(item.prompt) and
                  d[len(item.prompt):].startswith(item.target)]
        assert item.options[item.answer] == item.target and len(set(item.options)) == 4
        for i, option in enumerate(item.options):
            if i != item.answer:                 # a line of another document, not the target
                assert any(option in [line.strip() for line in other.split(b"\n")]
                           for other in CODE if other is not doc)


def greedy_line_reference(signature, prompt: bytes, max_new: int) -> bytes:
    """Greedy decoding by hand over token_logits: [BOS] + the prompt's last ids, argmax (PAD and
    BOS never chosen), until "\\n", EOS or max_new."""
    ids = [TOKENIZER.bos_id] + list(TOKENIZER.encode(prompt))
    out = []
    for _ in range(max_new):
        window = np.array([ids[-CONTEXT:]], np.int32)
        logits = signature(input_ids=window)["logits"].numpy()[0, -1].astype(np.float64)
        logits[[TOKENIZER.pad_id, TOKENIZER.bos_id]] = -np.inf
        token = int(np.argmax(logits))
        if token == TOKENIZER.eos_id:
            break
        ids.append(token)
        out.append(token)
        if token == ord("\n"):
            break
    return TOKENIZER.decode(out)


def test_task_scores_equal_references_on_the_served_signatures(loaded):
    """Completion: the `sample` signature's greedy line equals a hand greedy loop over
    token_logits; choice: the pick equals argmax of `score` per option per byte, called one
    option at a time. Catches options scored without the length normalisation, the answer index
    misread, sample run with a temperature, and the prediction not cut at the newline."""
    from components.evaluation import tasks
    items = tasks.build_items(SHORT_CODE, 5, 0, CONTEXT - 1)
    assert len(items) == 5
    sample, score = loaded.signatures["sample"], loaded.signatures["score"]

    def sample_fn(prompts, max_new):
        n = len(prompts)
        return list(sample(prompt=tf.constant(prompts), max_new_tokens=tf.constant(max_new),
                           temperature=tf.zeros([n]), top_k=tf.zeros([n], tf.int32),
                           top_p=tf.ones([n]), seed=tf.zeros([n], tf.int32),
                           stop=tf.constant([b"\n"] * n))["text_bytes"].numpy())
    got = tasks.completion_scores(sample_fn, items, 2, MAX_NEW)
    predicted = [greedy_line_reference(loaded.signatures["token_logits"], i.prompt, MAX_NEW)
                 .split(b"\n")[0].rstrip() for i in items]
    assert got["task_completion_exact_match"] == np.mean([p == i.target for p, i in zip(predicted, items)])
    import difflib
    assert got["task_completion_edit_similarity"] == pytest.approx(np.mean(
        [difflib.SequenceMatcher(None, p, i.target).ratio() for p, i in zip(predicted, items)]))
    picks = []
    for item in items:
        per_byte = [float(score(prompt=tf.constant([item.prompt]),
                                continuation=tf.constant([o]))["log_prob"].numpy()[0]) / len(o)
                    for o in item.options]
        picks.append(int(np.argmax(per_byte)) == item.answer)
    choice = tasks.choice_scores(lambda p, c: score(prompt=tf.constant(p), continuation=tf.constant(c))[
        "log_prob"].numpy(), items, 3)
    assert choice["task_choice_accuracy"] == np.mean(picks)
    assert choice["task_choice_centred_accuracy"] == pytest.approx((np.mean(picks) - 0.25) / 0.75)


def test_completion_and_choice_rules_on_hand_made_outputs():
    """The rules alone, on outputs whose right answers are worked out by hand: a continuation is
    cut at its first newline (a SentencePiece piece may hold "\\n" and the next line's indent)
    and its trailing blanks; edit similarity is SequenceMatcher's 2 x matches / total length
    ("abcd" vs "abce": 6 / 8); the pick is by log-likelihood per byte, not in total."""
    from components.evaluation import tasks
    items = [tasks.Item(b"k1", b"p", b"abcd", (b"abcd", b"w", b"x", b"y"), 0),
             tasks.Item(b"k2", b"p", b"long option", (b"s", b"long option", b"t", b"u"), 1)]
    outputs = [b"abcd  \n    more", b"long optiom\n"]
    got = tasks.completion_scores(lambda prompts, _: outputs[:len(prompts)], items, 4, 20)
    assert got["task_completion_exact_match"] == 0.5
    assert got["task_completion_edit_similarity"] == pytest.approx((1.0 + 20 / 22) / 2)
    # item 1: "abcd" -4.0 (-1.0/byte) beats "w" -1.5; item 2: "long option" -5.5 (-0.5/byte)
    # beats "s" -0.9 (-0.9/byte) per byte, though not in total: both picks right, accuracy 1.
    scores = [-4.0, -1.5, -2.0, -2.5, -0.9, -5.5, -1.0, -1.2]
    choice = tasks.choice_scores(lambda p, c: scores[:len(p)] if len(p) == 8 else None, items, 8)
    assert choice["task_choice_accuracy"] == 1.0 and choice["task_choice_centred_accuracy"] == 1.0
