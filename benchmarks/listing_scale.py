"""Listing and fingerprinting 100,000 small input files: the input listing
(`list_input_files`), the metadata fingerprint (`input_fingerprint`: one stat per file, no bytes
read) and the up-to-date signature, timed separately, side by side with reading every byte (a
content hash, what the metadata fingerprint saves), on the same files in one run.

Creates the files in a temporary directory (1,000 folders x 100 files of ~100 bytes; creation is
not timed) and removes them at the end.

    .venv/bin/python benchmarks/listing_scale.py [--files 100000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from components.storage import listing  # noqa: E402
from components.config import DataConfig  # noqa: E402


def make_corpus(root: str, files: int) -> None:
    per_folder = 100
    for i in range(files):
        folder = os.path.join(root, f"d{i // per_folder:05d}")
        if i % per_folder == 0:
            os.makedirs(folder)
        with open(os.path.join(folder, f"f{i:06d}.txt"), "w") as fh:
            fh.write(f"document {i}\n" * 8)


def content_hash(files) -> str:
    """What the fingerprint was before: sha256 of every file's bytes (the comparison)."""
    outer = hashlib.sha256()
    for relative, path in files:
        with open(path, "rb") as fh:
            outer.update(f"{relative}\0{hashlib.sha256(fh.read()).hexdigest()}\n".encode())
    return outer.hexdigest()


def timed(label: str, fn):
    started = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - started
    print(f"  {label:<38} {seconds:7.2f} s")
    return value, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    root = tempfile.mkdtemp(prefix="bigtrain-listing-")
    try:
        make_corpus(root, args.files)
        print(f"{args.files} files under {root}:")
        (_, files), _ = timed("list_input_files", lambda: listing.list_input_files(root))
        assert len(files) == args.files
        timed("input_fingerprint (metadata)", lambda: listing.input_fingerprint(files))
        timed("fingerprint_input (list + metadata)",
              lambda: listing.fingerprint_input(DataConfig(input=root)))
        timed("content hash (every byte)", lambda: content_hash(files))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
