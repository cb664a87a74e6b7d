"""The input and settings of TokenizerGen's sample-read tests (tests/components/
test_tokenizer_sample_pipeline.py, and on Beam's DaskRunner test_dask_runner.py): many units,
duplicates across units, quarantined files."""

import dataclasses
import os
import shutil

from components.config import DataConfig


def make_sample_input(corpus_root: str, root) -> str:
    """The shared corpus copied to `root`, a copy of one file under another name (a duplicate
    with CRLF line ends), and one big file read in ranges; returns root."""
    shutil.copytree(corpus_root, root, symlinks=True)
    original = (root / "json" / "decoder.py").read_bytes()
    (root / "zz_copy.py").write_bytes(original.replace(b"\n", b"\r\n"))
    with open(root / "all.txt", "wb") as out:
        for name in sorted(os.listdir(root / "email")):
            if name.endswith(".py"):
                out.write((root / "email" / name).read_bytes())
    return str(root)


def data_config(root, **changes):
    return dataclasses.replace(
        DataConfig(input=root, exclude=(), eval_fraction=0.3, document="file",
                   range_bytes=40_000, tokenizer="sentencepiece", vocab_size=400,
                   tokenizer_sample_bytes=30_000), **changes)
