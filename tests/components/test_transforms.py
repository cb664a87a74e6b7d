"""The data stage: readers (plain functions), Beam transforms with TestPipeline + assert_that, the
bad-input matrix, and determinism across parallelism."""

import gzip
import json
import os
import random
import shutil
import socket

import numpy as np
import pytest

from components.corpus import documents as docs
from components.storage import listing
from components import config as config_lib
from components.config import DataConfig
from components.corpus import readers
from components.text_example_gen import order, shards, transforms
from components.text_example_gen.component import check_accounting
from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID
from benchmarks.support import single_process
from tests.support.data_stage import (TWO_WORKERS, digest_tree, reader_config, run_stage, split_ids,
                                      stage_files)


def test_list_input_files_directory_glob_exclude(corpus):
    root, _ = corpus
    listed_root, files = listing.list_input_files(root)
    assert listed_root == os.path.abspath(root)
    relatives = [r for r, _ in files]
    assert relatives == sorted(relatives)
    assert "json/__init__.py" in relatives and "dangling.txt" in relatives
    _, py_only = listing.list_input_files(os.path.join(root, "**", "*.py"),
                                              exclude=["*/email/*"])
    assert py_only and all(r.endswith(".py") and not r.startswith("email") for r, _ in py_only)
    with pytest.raises(FileNotFoundError, match="^data.input .* matches no files"):
        listing.list_input_files(os.path.join(root, "*.nothing"))
    # a mixture's source that matches nothing is named by its entry, not data.input (issue 41)
    mixture = config_lib.build_config("tiny", overrides=[
        f"data.sources=[{{name: code, input: '{root}/**/*.py'}}, "
        f"{{name: prose, input: '{root}/*.nothing'}}]"]).data
    with pytest.raises(FileNotFoundError, match=r"^data.sources\[1\] \(prose\).input '.*"
                                                r"\*.nothing' .* matches no files"):
        listing.list_sources(mixture)


# ----------------------------------------------------------------------------------------------
# Readers: ranges, separators, limits (plain functions, no Beam).


def read_all(path, config, relative="f.txt"):
    """Every event of a file read as the planner splits it, in order."""
    units = readers.plan_units([(relative, path)], config)
    return [e for u in units for p in u.pieces for e in readers.read_piece(p, config)]


def texts_and_bytes(events):
    documents = [e for e in events if isinstance(e, docs.Document)]
    counted = sum(e.source_bytes for e in documents) + sum(
        e.bytes for e in events if isinstance(e, (docs.Skipped, docs.Separator)))
    consumed = sum(e[1] for e in events if isinstance(e, tuple) and e[0] == "consumed")
    return documents, counted, consumed


@pytest.mark.parametrize("separator", [b"\n\n", b"<|endoftext|>", b"\n"])
def test_ranges_read_every_document_exactly_once(tmp_path, separator):
    """Reading a file in many small byte ranges gives exactly the documents of one pass, with
    stable ids (path@offset), and every byte accounted once. Catches off-by-one range alignment
    (a document read twice or lost at a range boundary)."""
    rng = random.Random(7)
    words = [b"alpha", b"beta", b"\xc3\xa9t\xc3\xa9", b"x" * 40, b"\n", b" "]
    parts = []
    for _ in range(300):
        parts.append(b"".join(rng.choice(words) for _ in range(rng.randint(0, 30))))
        parts.append(separator * rng.choice([1, 1, 1, 2]))
    path = tmp_path / "f.txt"
    path.write_bytes(b"".join(parts))
    size = path.stat().st_size
    one_pass = reader_config(document="separator", separator=separator, range_bytes=10**9)
    if separator == b"\n":
        one_pass = one_pass._replace(document="record")
    reference, counted, consumed = texts_and_bytes(read_all(str(path), one_pass))
    assert counted == consumed == size
    data = path.read_bytes()
    for d in reference:  # the id is the document's byte offset in the file
        offset = int(d.id.split("@")[1])
        assert d.id.startswith("f.txt@") and data[offset:offset + len(d.text)] == d.text
        assert not d.text.startswith(separator) and not d.text.endswith(separator)
    for range_bytes in (7, 64, 1000, size - 1):
        events = read_all(str(path), one_pass._replace(range_bytes=range_bytes))
        documents, counted, consumed = texts_and_bytes(events)
        assert counted == consumed == size, range_bytes
        assert [(d.id, d.text) for d in documents] == [(d.id, d.text) for d in reference], range_bytes


def test_too_large_document_is_quarantined_with_its_location(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"small one\n\n" + b"y" * 5000 + b"\n\nsmall two")
    events = read_all(str(path), reader_config(document="separator", max_document_bytes=1000,
                                               range_bytes=10**6))
    documents, counted, consumed = texts_and_bytes(events)
    assert [d.text for d in documents] == [b"small one", b"small two"]
    (big,) = [e for e in events if isinstance(e, docs.Skipped)]
    assert (big.location, big.reason, big.bytes) == ("f.txt@11", docs.TOO_LARGE, 5000)
    assert counted == consumed == path.stat().st_size
    # As a whole-file document the same file is one too-large document; the hint names the fix.
    (whole,) = [e for e in read_all(str(path), reader_config(max_document_bytes=1000))
                if isinstance(e, docs.Skipped)]
    assert whole.reason == docs.TOO_LARGE and "data.document=separator" in whole.detail


def test_plan_units_batches_small_files_and_splits_big_ones(tmp_path):
    files = []
    for name, size in (("a", 10), ("b", 10), ("c", 1000), ("d", 10)):
        (tmp_path / name).write_bytes(b"x\n" * (size // 2))
        files.append((name, str(tmp_path / name)))
    units = readers.plan_units(files, reader_config(document="record", range_bytes=300))
    assert [[(p.relative, p.start, p.end, p.first) for p in u.pieces] for u in units] == [
        [("a", 0, None, True), ("b", 0, None, True)],
        [("c", 0, 300, True)], [("c", 300, 600, False)], [("c", 600, 900, False)],
        [("c", 900, None, False)], [("d", 0, None, True)]]
    # Whole-file documents are never split.
    assert len(readers.plan_units(files, reader_config(range_bytes=300))) == 2


# ----------------------------------------------------------------------------------------------
# The whole stage (TextToTFRecordShards).


def test_read_split_documents_splits_by_content(corpus):
    root, quarantined = corpus
    _, files = listing.list_input_files(root)
    data = DataConfig(input=root, exclude=(), eval_fraction=0.3, dedup="none")
    got = [(d.id, split) for split, d in single_process.read_split_documents(data)]
    assert sorted(got) == sorted(
        (r, docs.split_for(docs.content_key(open(a, "rb").read()), 0.3))
        for r, a in files if r not in quarantined)


def test_shards_counters_manifest_and_determinism(corpus, tmp_path):
    root, quarantined = corpus
    _, files = listing.list_input_files(root)
    counters = run_stage(files, str(tmp_path / "a"))
    # Nothing is lost: bytes read = packed + quarantined (+ separators); files = read + skipped.
    check_accounting(counters, len(files), "manifest")
    source_bytes = sum(os.path.getsize(a) for _, a in files if os.path.isfile(a))
    assert counters["bytes_read"] == source_bytes
    for reason in docs.DOCUMENT_REASONS:
        expected = sum(1 for r in quarantined.values() if r == reason)
        assert counters[f"documents_skipped_{reason}"] == expected, reason
    assert counters["files_skipped_unreadable"] == 1  # the dangling symlink

    tree = digest_tree(str(tmp_path / "a"))
    assert sorted(k for k in tree if not k.startswith(shards.PIECES_DIR)) == sorted(
        [f"Split-train/data_tfrecord-{i:05d}-of-00003.gz" for i in range(3)]
        + [f"Split-eval/data_tfrecord-{i:05d}-of-00002.gz" for i in range(2)]
        + [transforms.QUARANTINE_MANIFEST])
    # The pieces outlive assembly (a retried bundle re-reads them; the executor removes them
    # after the stage); no attempt's temporary file is left.
    assert [k for k in tree if k.startswith(shards.PIECES_DIR)]
    assert not [k for k in tree if ".tmp" in k]
    manifest = [json.loads(line) for line in open(tmp_path / "a" / transforms.QUARANTINE_MANIFEST)]
    assert [m["path"] for m in manifest] == sorted(m["path"] for m in manifest)
    assert {m["path"]: m["reason"] for m in manifest} == quarantined
    assert sum(m["bytes"] for m in manifest) == counters["bytes_quarantined"]

    ids = split_ids(str(tmp_path / "a"))
    for split in ("train", "eval"):
        assert len(ids[split]) == counters[f"sequences_{split}"] > 0
    every = np.array(ids["train"] + ids["eval"])
    assert every.shape[1] == 65 and every.min() >= 0 and every.max() <= EOS_ID
    assert np.count_nonzero(every == PAD_ID) == counters["tokens_padding"]
    assert every.size - counters["tokens_padding"] == counters["tokens_real"]
    assert counters["tokens_real"] / every.size >= 0.95

    run_stage(files, str(tmp_path / "b"))
    assert digest_tree(str(tmp_path / "b")) == tree


def unpack(windows):
    stream = list(windows[0])
    for window in windows[1:]:
        assert window[0] == stream[-1]
        stream.extend(window[1:])
    while stream and stream[-1] == PAD_ID:
        stream.pop()
    return stream


def test_single_file_feeds_both_splits_losslessly(tmp_path):
    """One text file split on <|endoftext|>: both splits get documents (by content), and each
    split's shard unpacks to exactly its documents, in file order, framed by BOS/EOS: the eval
    shard as it is, the train shard once its windows are put back from the train order
    (order.py: sorted by record_key(unit 0, index in the packing order))."""
    texts = [f"document {i}: ".encode() + b"word " * (i % 17 + 1) for i in range(200)]
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "corpus.txt"
    path.write_bytes(b"<|endoftext|>".join(texts))
    config = reader_config(document="separator", separator=b"<|endoftext|>")
    counters = run_stage([("corpus.txt", str(path))], str(tmp_path / "out"), config=config,
                         train_shards=1, eval_shards=1)
    check_accounting(counters, 1, "manifest")
    by_split = {"train": [], "eval": []}
    for text in texts:
        by_split[docs.split_for(docs.content_key(text), 0.3)].append(text)
    ids = split_ids(str(tmp_path / "out"))
    keys = [order.record_key(0, i) for i in range(len(ids["train"]))]
    packed = [None] * len(keys)
    for window, index in zip(ids["train"], sorted(range(len(keys)), key=keys.__getitem__)):
        packed[index] = window
    assert packed != ids["train"]
    ids["train"] = packed
    for split, expected in by_split.items():
        assert expected, split
        framed = [i for t in expected for i in [BOS_ID, *t, EOS_ID]]
        assert unpack(ids[split]) == framed, split


def write_bad_inputs(root):
    """One of every kind of bad input, across the three formats. Returns expected counters."""
    os.makedirs(root / "text")
    os.mkfifo(root / "text" / "fifo.txt")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "text" / "socket.txt"))
    os.symlink("/dev/zero", root / "text" / "device.txt")          # endless if ever opened
    os.symlink(root / "missing", root / "text" / "dangling.txt")
    (root / "text" / "latin1.txt").write_bytes("good\n\ncaf\u00e9\n\nfine".encode("latin-1"))
    (root / "text" / "good.txt").write_bytes(b"hello\n\n   \n\nworld")
    rng = random.Random(3)
    full = gzip.compress(b"first doc\n\n" + bytes(rng.choice(b"abcdefgh ") for _ in range(20000)))
    (root / "text" / "cut.txt.gz").write_bytes(full[: len(full) // 2])
    return sock


def test_bad_text_input_is_quarantined_by_reason_and_never_hangs(tmp_path):
    sock = write_bad_inputs(tmp_path)
    _, files = listing.list_input_files(str(tmp_path / "text"))
    config = reader_config(document="separator")
    counters = run_stage(files, str(tmp_path / "out"), config=config, eval_fraction=0.5)
    sock.close()
    assert counters["files_skipped_not_regular_file"] == 3   # FIFO, socket, device: not opened
    assert counters["files_skipped_unreadable"] == 1
    assert counters["documents_skipped_not_utf8"] == 1       # one document, not the whole file
    assert counters["documents_skipped_empty"] == 1          # "   "
    assert counters["documents_skipped_truncated_input"] == 1
    assert counters["documents_packed"] == 5  # good, fine, hello, world, first doc
    check_accounting(counters, len(files), "manifest")
    manifest = {m["path"]: m["reason"] for m in map(json.loads, open(tmp_path / "out" / "quarantine.jsonl"))}
    assert manifest["fifo.txt"] == "not_regular_file"
    assert manifest["latin1.txt@6"] == "not_utf8" and manifest["cut.txt.gz@11"] == "truncated_input"


def test_bad_jsonl_records_are_quarantined_per_record(tmp_path):
    lines = [b'{"text": "one"}', b'not json', b'{"body": "no text field"}', b'{"text": 7}',
             b'{"text": null}', b'{"text": ""}', b'{"text": "caf\\u00e9 two"}', b'[1, 2]',
             b'{"text": "\xff bad utf8"}', b'', b'{"text": "three"}']
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (tmp_path / "in" / "b.json.gz").write_bytes(gzip.compress(b'{"text": "four"}\n{"text": 5}\n'))
    _, files = listing.list_input_files(str(tmp_path / "in"))
    counters = run_stage(files, str(tmp_path / "out"), eval_fraction=0.5,
                         config=reader_config(format="jsonl"))
    check_accounting(counters, 2, "manifest", both_splits=False)
    assert counters["documents_packed"] == 4
    assert (counters["documents_skipped_invalid_json"], counters["documents_skipped_missing_field"],
            counters["documents_skipped_not_string"], counters["documents_skipped_empty"],
            counters["documents_skipped_not_utf8"]) == (1, 3, 2, 1, 1)
    assert counters["bytes_read"] == len(b"\n".join(lines) + b"\n") + 29
    manifest = [json.loads(l) for l in open(tmp_path / "out" / "quarantine.jsonl")]
    assert manifest[0] == {"path": "a.jsonl@16", "reason": "invalid_json", "bytes": 8,
                           "records": 1, "detail": manifest[0]["detail"]}
    text = b"".join(bytes(i for i in w if i < 256) for s in split_ids(str(tmp_path / "out")).values()
                    for w in s)
    for word in (b"one", "caf\u00e9 two".encode(), b"three", b"four"):
        assert word in text


def write_parquet(path, table):
    import pyarrow.parquet as pq
    pq.write_table(table, path, row_group_size=50)


def test_parquet_rows_are_documents_and_missing_column_is_counted_per_row(tmp_path):
    import pyarrow as pa
    (tmp_path / "in").mkdir()
    texts = [f"row {i} " * (i % 9 + 1) for i in range(300)] + [None, ""]
    write_parquet(tmp_path / "in" / "good.parquet", pa.table({"text": texts, "n": list(range(302))}))
    write_parquet(tmp_path / "in" / "other.parquet", pa.table({"body": ["x"] * 40}))
    _, files = listing.list_input_files(str(tmp_path / "in"))
    counters = run_stage(files, str(tmp_path / "out"), config=reader_config(format="parquet"))
    check_accounting(counters, 2, "manifest")
    assert counters["documents_packed"] == 300
    assert counters["documents_skipped_missing_field"] == 40 + 1  # every row of other + the null
    assert counters["documents_skipped_empty"] == 1
    assert counters["bytes_packed"] == sum(len(t) for t in texts[:300])
    assert counters["sequences_train"] > 0 and counters["sequences_eval"] > 0


@pytest.mark.slow
def test_multi_processing_gives_the_same_bytes_as_in_memory(corpus, tmp_path):
    """DirectRunner with 2 worker processes writes byte-identical shards and manifest (many small
    units: ranges of one big file and batches of small files), and counts the same."""
    files = stage_files(corpus, tmp_path)
    config = reader_config(document="separator", range_bytes=40_000)
    in_memory = run_stage(files, str(tmp_path / "in_memory"), config=config)
    parallel = run_stage(files, str(tmp_path / "parallel"), beam_args=TWO_WORKERS, config=config)
    assert parallel == in_memory
    assert len(readers.plan_units(files, config)) > 10
    assert digest_tree(str(tmp_path / "parallel")) == digest_tree(str(tmp_path / "in_memory"))


def test_an_empty_split_names_what_was_quarantined_not_a_file_tfx_deletes(tmp_path):
    """The error of an empty split is raised inside the data stage, whose outputs (the quarantine
    manifest among them) TFX deletes when the stage fails: the message must not send the user
    to that file, but say inline what was quarantined and why."""
    counters = {name: 0 for name in transforms.COUNTER_NAMES}
    counters.update(files_seen=3, files_read=2, files_skipped_unreadable=1, documents_packed=1,
                    documents_skipped_not_utf8=2, sequences_train=1, sequences_eval=0)
    manifest = tmp_path / "Examples" / "quarantine.jsonl"
    manifest.parent.mkdir()
    manifest.write_text("".join(json.dumps({"path": p, "reason": r}) + "\n" for p, r in [
        ("gone.txt", "unreadable"), ("a.txt@0", "not_utf8"), ("a.txt@9", "not_utf8"),
        ("b.txt@4", "not_utf8")]))
    with pytest.raises(ValueError) as raised:
        check_accounting(counters, 3, str(manifest))
    message = str(raised.value)
    shutil.rmtree(manifest.parent)                       # what TFX does to a failed stage's outputs
    assert "split 'eval' received no sequences" in message
    assert str(manifest.parent) not in message
    assert ("1 files unreadable, 2 documents not_utf8; first quarantined: gone.txt (unreadable), "
            "a.txt@0 (not_utf8), a.txt@9 (not_utf8))") in message


def test_an_empty_split_of_sampled_out_documents_says_so_not_add_input(tmp_path):
    """Issue 41: a mixture weight of 1e-300 samples every document out; the empty split's advice
    names the weights instead of "add input" (the old message: 0 documents packed, add input)."""
    counters = {name: 0 for name in transforms.COUNTER_NAMES}
    counters.update(files_seen=2, files_read=2, documents_sampled_out=5, sequences_train=0,
                    sequences_eval=0)
    with pytest.raises(ValueError) as raised:
        check_accounting(counters, 2, str(tmp_path / "quarantine.jsonl"))
    message = str(raised.value)
    assert "5 documents were sampled out by the mixture" in message
    assert "data.sources[*].weight" in message and "add input" not in message
