"""Beam transforms of the data stage, with TestPipeline + assert_that."""

import glob
import hashlib
import json
import os

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from components.text_example_gen import packing, transforms
from components.text_example_gen.component import check_accounting, counters_from_metrics
from components.text_example_gen.tokenizer import BOS_ID, EOS_ID, PAD_ID

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def test_list_input_files_directory_glob_exclude(corpus):
    root, _ = corpus
    listed_root, files = transforms.list_input_files(root)
    assert listed_root == os.path.abspath(root)
    relatives = [r for r, _ in files]
    assert relatives == sorted(relatives)
    assert "json/__init__.py" in relatives and "dangling.txt" in relatives
    _, py_only = transforms.list_input_files(os.path.join(root, "**", "*.py"),
                                              exclude=["*/email/*"])
    assert py_only and all(r.endswith(".py") and not r.startswith("email") for r, _ in py_only)
    with pytest.raises(FileNotFoundError, match="matches no files"):
        transforms.list_input_files(os.path.join(root, "*.nothing"))


def test_read_text_files_classifies_and_splits(corpus):
    root, quarantined = corpus
    _, files = transforms.list_input_files(root)
    with TestPipeline(argv=BEAM_ARGS) as p:
        read = (p | beam.Create(files)
                  | transforms.ReadTextFiles(eval_fraction=0.3, split_salt="", pack_buckets=4,
                                             max_file_bytes=10**7))
        reasons = read["quarantine"] | beam.Map(lambda r: (r["path"], r["reason"]))
        assert_that(reasons, equal_to(list(quarantined.items())), label="QuarantineReasons")
        keys = read["documents"] | beam.Map(lambda kv: (kv[1][0], kv[0]))
        expected_keys = [(r, (packing.split_for(r, 0.3), packing.bucket_for(r, 4)))
                         for r, a in files if r not in quarantined]
        assert_that(keys, equal_to(expected_keys), label="SplitAndBucket")


def test_too_large_files_are_quarantined_not_read(corpus):
    root, _ = corpus
    _, files = transforms.list_input_files(os.path.join(root, "json", "*.py"))
    with TestPipeline(argv=BEAM_ARGS) as p:
        read = (p | beam.Create(files)
                  | transforms.ReadTextFiles(0.5, "", 2, max_file_bytes=1000))
        big = [r for r, a in files if os.path.getsize(a) > 1000]
        assert big
        assert_that(read["quarantine"] | beam.Map(lambda r: (r["path"], r["reason"], r["bytes"])),
                    equal_to([(r, "too_large", 0) for r in big]))


def test_pack_sequences_is_lossless_per_bucket():
    docs = {f"d{i}.txt": (f"document {i} " * (i * 7 + 1)).encode() for i in range(12)}
    seq_len = 32
    keyed = [((packing.split_for(p, 0.3), packing.bucket_for(p, 3)), (p, d)) for p, d in docs.items()]

    def unpack_bucket(element):
        from tensorflow.core.example import example_pb2
        (split, bucket), windows = element
        windows = sorted(windows)
        stream = []
        for _, raw in windows:
            ids = list(example_pb2.Example.FromString(raw).features.feature["input_ids"].int64_list.value)
            assert len(ids) == seq_len + 1
            stream.extend(ids if not stream else ids[1:])
        text = bytes(i for i in stream if i < 256)
        assert stream.count(BOS_ID) == stream.count(EOS_ID)
        return split, bucket, stream.count(BOS_ID), text

    expected = {}
    for (split, bucket), (p, d) in sorted(keyed, key=lambda kv: kv[1][0]):
        n, text = expected.get((split, bucket), (0, b""))
        expected[(split, bucket)] = (n + 1, text + d)
    with TestPipeline(argv=BEAM_ARGS) as p:
        packed = (p | beam.Create(keyed) | transforms.PackSequences(seq_len)
                    | beam.Map(lambda s: ((s[0], s[1][0]), (s[1][1], s[2])))
                    | beam.GroupByKey() | beam.Map(unpack_bucket))
        assert_that(packed, equal_to([(s, b, n, t) for (s, b), (n, t) in expected.items()]))


def run_stage(files, out_dir, beam_args=BEAM_ARGS, **overrides):
    params = dict(seq_len=64, eval_fraction=0.3, split_salt="", pack_buckets=4,
                  max_file_bytes=10**7, train_shards=3, eval_shards=2)
    params.update(overrides)
    p = TestPipeline(argv=beam_args, blocking=True)
    _ = p | transforms.TextToTFRecordShards(files, out_dir, **params)
    result = p.run()
    result.wait_until_finish()
    return counters_from_metrics(result)


def digest_tree(root):
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "*"), recursive=True)):
        if os.path.isfile(path):
            out[os.path.relpath(path, root)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


def read_ids(path):
    import tensorflow as tf
    from tensorflow.core.example import example_pb2
    return [list(example_pb2.Example.FromString(r.numpy()).features.feature["input_ids"]
                 .int64_list.value) for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]


def test_shards_counters_manifest_and_determinism(corpus, tmp_path):
    root, quarantined = corpus
    _, files = transforms.list_input_files(root)
    counters = run_stage(files, str(tmp_path / "a"))
    # Nothing is lost: bytes read = packed + quarantined; files listed = packed + skipped.
    check_accounting(counters, len(files), "manifest")
    assert counters["bytes_read"] == counters["bytes_packed"] + counters["bytes_quarantined"]
    source_bytes = sum(os.path.getsize(a) for _, a in files if os.path.isfile(a))
    assert counters["bytes_read"] == source_bytes
    for reason in packing.SKIP_REASONS:
        expected = sum(1 for r in quarantined.values() if r == reason)
        assert counters[f"files_skipped_{reason}"] == expected, reason

    tree = digest_tree(str(tmp_path / "a"))
    assert sorted(tree) == sorted(
        [f"Split-train/data_tfrecord-{i:05d}-of-00003.gz" for i in range(3)]
        + [f"Split-eval/data_tfrecord-{i:05d}-of-00002.gz" for i in range(2)]
        + [transforms.QUARANTINE_MANIFEST])
    manifest = [json.loads(line) for line in open(tmp_path / "a" / transforms.QUARANTINE_MANIFEST)]
    assert [m["path"] for m in manifest] == sorted(m["path"] for m in manifest)
    assert {m["path"]: m["reason"] for m in manifest} == quarantined
    assert sum(m["bytes"] for m in manifest) == counters["bytes_quarantined"]

    # Shards hold exactly the counted sequences, each seq_len + 1 ids in the vocabulary.
    ids = {s: [x for f in sorted(glob.glob(str(tmp_path / "a" / f"Split-{s}" / "*.gz")))
               for x in read_ids(f)] for s in ("train", "eval")}
    for split in ("train", "eval"):
        assert len(ids[split]) == counters[f"sequences_{split}"] > 0
    every = np.array(ids["train"] + ids["eval"])
    assert every.shape[1] == 65 and every.min() >= 0 and every.max() <= EOS_ID
    assert np.count_nonzero(every == PAD_ID) == counters["tokens_padding"]
    assert every.size - counters["tokens_padding"] == counters["tokens_real"]

    # Identical input gives byte-identical output.
    run_stage(files, str(tmp_path / "b"))
    assert digest_tree(str(tmp_path / "b")) == tree


@pytest.mark.slow
def test_multi_processing_gives_the_same_records_as_in_memory(corpus, tmp_path):
    """DirectRunner with 2 worker processes writes byte-identical shards, and counts the same."""
    root, _ = corpus
    _, files = transforms.list_input_files(root)
    in_memory = run_stage(files, str(tmp_path / "in_memory"))
    parallel = run_stage(files, str(tmp_path / "parallel"), beam_args=[
        "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    assert parallel == in_memory
    assert digest_tree(str(tmp_path / "parallel")) == digest_tree(str(tmp_path / "in_memory"))
