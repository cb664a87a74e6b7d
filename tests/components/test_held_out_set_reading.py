"""Reading a held-out set (components/evaluation/held_out_sets.py, issue 57): the key is the files'
bytes, the read is a stream bounded by the cap, texts that are not text are skipped and counted,
and a set that chooses nothing says why. Hand-made sets in tmp_path, the byte tokenizer (an id is
a byte), no model. Each test names the mutation it catches."""

import hashlib
import json
import os
import tracemalloc

import numpy as np

from components.config import build_config
from components.config.heldout import HeldOutSetConfig
from components.evaluation import documents, held_out_sets
from components.tokenizer.byte_level import ByteTokenizer

TOKENIZER = ByteTokenizer()


def eval_config(tmp_path, pattern="*", **set_settings):
    extra = "".join(f", {k}: {v}" for k, v in set_settings.items())
    return build_config("tiny", overrides=[
        f"eval.sets=[{{name: s, input: '{tmp_path}/{pattern}'{extra}}}]"]).eval


def test_a_set_file_rewritten_at_the_same_size_and_mtime_changes_the_key(tmp_path):
    """Other text of the same size, the modification time put back (and then an older one): the
    key changes, so the memoized figures and the Evaluator's cache miss. Catches a key over the
    listing metadata (size, mtime: the old key, which stays equal here) instead of the bytes."""
    path = tmp_path / "a.txt"
    path.write_bytes(b"def one(): return 1\n")
    config = eval_config(tmp_path)
    before, stat = held_out_sets.sets_fingerprint(config), os.stat(path)
    assert held_out_sets.sets_fingerprint(config) == before
    path.write_bytes(b"def two(): return 2\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_size == stat.st_size and os.stat(path).st_mtime_ns == stat.st_mtime_ns
    rewritten = held_out_sets.sets_fingerprint(config)
    assert rewritten != before
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10**9))      # an older mtime
    assert held_out_sets.sets_fingerprint(config) == rewritten           # the bytes, only
    assert held_out_sets.sets_cache_key(config) == rewritten


def test_a_large_text_file_is_read_and_tokenized_only_as_far_as_its_cut(tmp_path):
    """An 8 MB one-document text file: the tokenizer sees at most max_document_bytes +
    PREFIX_SLACK bytes and Python's peak allocation stays far under the file (the whole-file read
    and its int64 ids: ~72 MB), while the chosen ids are the whole text's first
    max_document_bytes. Catches eval_texts reading a text file whole (max_file_bytes ignored)."""
    text = b"word " * (8 * 2**20 // 5)
    (tmp_path / "big.txt").write_bytes(text)
    config = eval_config(tmp_path, max_bytes=16384)
    held_out, seen = config.sets[0], []

    class Counting(ByteTokenizer):
        def encode(self, data):
            seen.append(len(data))
            return super().encode(data)
    tracemalloc.start()
    chosen = held_out_sets.set_documents(held_out, Counting(), config.max_document_bytes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seen and max(seen) <= config.max_document_bytes + held_out_sets.PREFIX_SLACK
    assert peak < 2 * 2**20, peak
    (ids,) = chosen.documents
    assert ids.tobytes() == np.frombuffer(text[:config.max_document_bytes], np.uint8).astype(np.int64).tobytes()


def test_a_jsonl_set_is_read_a_line_at_a_time(tmp_path):
    """4 MB of 2 KB records, max_bytes 3000: one document chosen, and the peak allocation is
    nowhere near the file (the old read held the file and its split lines: > 8 MB). Catches a
    JSONL set read whole (fs.read_bytes + splitlines)."""
    line = json.dumps({"text": "x = 1\n" * 300}) + "\n"
    (tmp_path / "big.jsonl").write_text(line * (4 * 2**20 // len(line)))
    config = eval_config(tmp_path, max_bytes=3000)
    tracemalloc.start()
    chosen = held_out_sets.set_documents(config.sets[0], TOKENIZER, config.max_document_bytes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(chosen.documents) == 1 and chosen.read == 4 * 2**20 // len(line)
    assert peak < 2 * 2**20, peak


def test_the_prefix_ends_at_a_blank_past_the_cut_or_a_character_boundary():
    """Hand cases of text_prefix at max_document_bytes 4: shorter texts whole, a run of spaces
    starting at or after byte 4 ends it there (not a space inside a run that started before), no
    such run within PREFIX_SLACK: cut there, never inside a UTF-8 character. Catches a prefix
    that splits a character."""
    assert held_out_sets.text_prefix(b"abc", 4) == b"abc"
    assert held_out_sets.text_prefix(b"abcd efgh", 4) == b"abcd"
    assert held_out_sets.text_prefix(b"ab cdef ghi", 4) == b"ab cdef"
    assert held_out_sets.text_prefix(b"abc    def ghi", 4) == b"abc    def"   # a run's start
    long = b"a" * (3 + held_out_sets.PREFIX_SLACK) + "é".encode() + b"zzz"
    assert held_out_sets.text_prefix(long, 4) == b"a" * (3 + held_out_sets.PREFIX_SLACK)


def test_the_prefix_gives_the_whole_texts_ids_up_to_the_cut_with_sentencepiece():
    """A SentencePiece model (unigram, the data stage's trainer) trained on the standard
    library's json package, then 60 cuts of the email and logging packages' files: the ids of
    text_prefix up to the cut equal the whole text's, so streaming chooses the documents the
    whole read chose. Catches a cut at any space (inside a run of spaces, where a
    whitespace-only piece began earlier: 14 of 125 cuts differed on a larger sample)."""
    import glob
    import sysconfig
    from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
    from components.tokenizer.training import train_sentencepiece

    def package(name):
        return [open(p, encoding="utf-8").read() for p in
                sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], name, "*.py")))]
    sp = SentencePieceTokenizer(train_sentencepiece(package("json"), 400), model_type="unigram")
    lengths, compared = sp.token_byte_lengths(), 0
    for text in (t.encode() for t in package("email") + package("logging")):
        for cut in (100, 1000, 4096):
            if len(text) > cut:
                whole = documents._cut(sp.encode(text), lengths, cut)
                streamed = documents._cut(sp.encode(held_out_sets.text_prefix(text, cut)), lengths, cut)
                assert whole.tolist() == streamed.tolist(), (text[:40], cut)
                compared += 1
    assert compared >= 60, compared


def test_binary_and_not_utf8_texts_are_skipped_and_counted(tmp_path):
    """One text, one file with a NUL byte, one not UTF-8: one document, the two counted under
    their reasons (and flattened to heldout_<set>_skipped_<reason>). Catches a binary file scored
    as text (issue 57: 10.92 bits/byte, silently)."""
    (tmp_path / "a.py").write_bytes(b"print('held out')\n")
    (tmp_path / "b.bin").write_bytes(b"\x89PNG\r\n\x00\x00\x00")
    (tmp_path / "c.txt").write_bytes(b"caf\xe9 latin-1\n")
    config = eval_config(tmp_path)
    chosen = held_out_sets.set_documents(config.sets[0], TOKENIZER, config.max_document_bytes)
    assert [d.tobytes() for d in chosen.documents] == [
        np.frombuffer(b"print('held out')\n", np.uint8).astype(np.int64).tobytes()]
    assert chosen.skipped == {"skipped_binary": 1, "skipped_not_utf8": 1} and chosen.read == 1
    flat = held_out_sets.flat_properties({"s": {"document_count": 1, **chosen.skipped}})
    assert flat == {"heldout_s_document_count": 1, "heldout_s_skipped_binary": 1,
                    "heldout_s_skipped_not_utf8": 1}


def test_a_set_whose_documents_are_all_larger_than_max_bytes_says_so(tmp_path):
    """Three 200-byte documents, max_bytes 100: measure_sets stops naming the set, max_bytes and
    the smallest document, not 'holds no document' (issue 57's false message); an empty set
    and an all-binary one still say 'holds no document', with the skipped counts. Catches the
    old message for every case."""
    records = [{"text": f"{i}" * 200} for i in range(3)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    config = eval_config(tmp_path, max_bytes=100)
    try:
        held_out_sets.measure_sets(None, 16, config, TOKENIZER)
    except ValueError as err:
        message = str(err)
    assert message.startswith("eval.sets s: ") and "every one of its 3 documents is larger " \
        "than max_bytes 100 (the smallest holds 200 bytes" in message
    (tmp_path / "a.jsonl").write_text("\n")
    (tmp_path / "b.bin").write_bytes(b"\x00")
    chosen = held_out_sets.set_documents(config.sets[0], TOKENIZER, 16384)
    assert held_out_sets.no_document_problem(config.sets[0], chosen, 16384).endswith(
        "holds no document (texts skipped: 1 binary)")


def _key(ids: bytes) -> int:
    data = documents.DOCUMENT_SEED.encode() + np.frombuffer(ids, np.uint8).astype(np.int64).tobytes()
    return int.from_bytes(hashlib.sha256(data).digest()[:16], "big")


def test_a_document_larger_than_the_budget_never_pushes_others_out():
    """A 10-byte document, then a 200-byte one with a smaller key, budget 100: the small one is
    chosen (the big one can never fit). Before, the big one's arrival evicted the small one (the
    larger key) and then itself: nothing chosen, decided by file order. Catches the oversize
    document pushed into the heap."""
    big = b"b" * 200
    small = next(s for s in (b"small %03d!" % i for i in range(100)) if _key(s) > _key(big))
    lengths = TOKENIZER.token_byte_lengths()
    tally = {}
    chosen = documents.choose_documents([TOKENIZER.encode(small), TOKENIZER.encode(big)], lengths,
                                        100, 16384, tally=tally)
    assert [c.tobytes() for c in chosen] == [TOKENIZER.encode(small).tobytes()]
    assert tally == {"documents": 2, "smallest": 10}


def test_a_task_gate_without_items_un_blesses_naming_why():
    """eval.min_task_choice_accuracy 0.9 on a task set that yields no item (issue 57: blessed,
    no line): the gate fails naming the set; off (0), nothing. Catches the gate skipped when no
    accuracy was measured."""
    config = build_config("tiny", overrides=["eval.min_task_choice_accuracy=0.9"]).eval
    failure = held_out_sets.task_gate_failure({"task_items": 0, "task_set": "flat"}, config)
    assert failure.startswith("eval.min_task_choice_accuracy 0.9000: no code task ran (held-out "
                              "flat yields no item")
    assert held_out_sets.task_gate_failure({"task_items": 0, "task_set": "flat"},
                                           build_config("tiny").eval) == ""
    assert "0.2656 < eval.min_task_choice_accuracy 0.9000" in held_out_sets.task_gate_failure(
        {"task_choice_accuracy": 0.2656, "task_set": "code"}, config)


def test_a_task_set_without_eligible_lines_reports_zero_items(tmp_path):
    """Two one-line documents (a document's first line is never an item): the tasks report
    task_items 0 with the set's name, what the gate and the report's plain line read, where
    before they reported nothing ({}). No model is loaded: there is nothing to run."""
    (tmp_path / "a.jsonl").write_text('{"text": "x = 1\\n"}\n{"text": "y = 2\\n"}\n')
    config = build_config("tiny", overrides=[
        f"eval.sets=[{{name: flat, input: '{tmp_path}/a.jsonl'}}]", "eval.task_items=4"]).eval
    assert held_out_sets.run_set_tasks(None, 64, config, TOKENIZER) == {"task_items": 0,
                                                                        "task_set": "flat"}
