"""Where TokenizerGen gets its documents: one small function, to be swapped for the data stage's
document reader when that lands (issue 11). Until then it follows the data stage's current rules
exactly: the same file listing (data.input, data.exclude), the same quarantine classification
(empty, binary, not UTF-8, too large, unreadable files are not documents) and the same
train/eval split by hash of the relative path.
"""

from __future__ import annotations

import collections
import os
from typing import Iterator, NamedTuple


class Document(NamedTuple):
    document_id: str     # the relative path: what the split and the sample are keyed on
    split: str           # "train" | "eval"
    text: str


def read_documents(data, skipped: collections.Counter | None = None) -> Iterator[Document]:
    """Every packable document of the raw input `data` (a DataConfig), in listing order.
    Files that are not documents are counted in `skipped` by reason, never silently lost."""
    from components.text_example_gen import packing, transforms
    skipped = skipped if skipped is not None else collections.Counter()
    _, files = transforms.list_input_files(data.input, data.exclude)
    for relative, absolute in files:
        try:
            if os.stat(absolute).st_size > data.max_file_bytes:
                skipped[packing.TOO_LARGE] += 1
                continue
            with open(absolute, "rb") as fh:
                raw = fh.read()
        except OSError:
            skipped[packing.UNREADABLE] += 1
            continue
        reason = packing.classify(raw)
        if reason is not None:
            skipped[reason] += 1
            continue
        split = packing.split_for(relative, data.eval_fraction, data.split_salt)
        yield Document(relative, split, raw.decode("utf-8"))


def input_fingerprint(data) -> str:
    """Content digest of the raw input (the data stage's own), or a marker when the input is not
    visible where the pipeline is compiled (a volume mounted only in the cluster)."""
    from components.text_example_gen.component import fingerprint_input
    try:
        return fingerprint_input(data)
    except FileNotFoundError:
        return "unresolved-at-compile-time"
