"""The data stage's Beam transforms run in-process on small inputs: reader settings, Beam options,
running a stage, reading its shards back, digests of a tree of files."""

import glob
import hashlib
import os

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components.storage import listing
from components.corpus import readers
from components.text_example_gen import shards, transforms
from components.text_example_gen.component import stage_counters


BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def reader_config(format="text", document="file", separator=b"\n\n", max_document_bytes=10**7,
                  range_bytes=10**7, text_field="text"):
    return readers.ReaderConfig(format, document, separator, text_field, max_document_bytes,
                                range_bytes)


def run_stage(files, out_dir, beam_args=BEAM_ARGS, config=None, **overrides):
    params = dict(seq_len=64, eval_fraction=0.3, split_salt="", train_shards=3, eval_shards=2)
    params.update(overrides)
    # TestPipeline(argv=...) keeps only --test-pipeline-options and drops every other argument
    # (the runner included): the options must be passed as PipelineOptions.
    p = TestPipeline(options=PipelineOptions(beam_args), blocking=True)
    _ = p | transforms.TextToTFRecordShards(files, out_dir, reader_config=config or reader_config(),
                                            **params)
    result = p.run()
    result.wait_until_finish()
    return stage_counters(out_dir)


def digest_tree(root):
    out = {}
    for path in sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names):
        out[os.path.relpath(path, root)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


def read_ids(path):
    import tensorflow as tf
    from tensorflow.core.example import example_pb2
    return [list(example_pb2.Example.FromString(r.numpy()).features.feature["input_ids"]
                 .int64_list.value) for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]


def split_ids(out_dir):
    return {s: [x for f in sorted(glob.glob(os.path.join(out_dir, f"Split-{s}", "*.gz")))
                for x in read_ids(f)] for s in ("train", "eval")}


def packed_ids(out_dir):
    """split_ids with the train windows in packing order (unit after unit, as the units' train
    pieces hold them, before order.py deals them into the shards in random order): checked to be
    the same windows as the train shards'."""
    ids = split_ids(out_dir)
    pieces = sorted(glob.glob(os.path.join(out_dir, shards.PIECES_DIR, "unit-*-train-*.gz")))
    packed = [x for f in pieces for x in read_ids(f)]
    assert sorted(packed) == sorted(ids["train"])
    return dict(ids, train=packed)


def stage_files(corpus, tmp_path):
    """The shared corpus plus one big file read in ranges: many small units."""
    root, _ = corpus
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "all.txt", "wb") as out:
        for _, path in listing.list_input_files(os.path.join(root, "email", "*.py"))[1]:
            out.write(open(path, "rb").read())
    _, files = listing.list_input_files(root)
    return files + [("big/all.txt", str(big / "all.txt"))]


def tree_digest(root):
    """Every file (hidden ones too: glob's ** skips the .pieces folder) -> sha256."""
    return {os.path.relpath(os.path.join(d, n), root):
            hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()
            for d, _, names in os.walk(root) for n in names}
