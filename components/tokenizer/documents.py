"""Where TokenizerGen gets its documents: the data stage's own readers (components/
text_example_gen/readers.py), so the tokenizer trains on exactly the documents the data stage
packs: the same listing (data.input, data.exclude), the same document rules (data.format,
data.document, data.separator, data.text_field, data.max_document_bytes), the same quarantine
classification and the same train/eval split by document id.
"""

from __future__ import annotations

import collections
from typing import Iterator, NamedTuple


class Document(NamedTuple):
    document_id: str     # the data stage's document id: what the split and the sample key on
    split: str           # "train" | "eval"
    text: str


def read_documents(data, skipped: collections.Counter | None = None) -> Iterator[Document]:
    """Every packable document of the raw input `data` (a DataConfig), in reading order.
    Quarantined files and documents are counted in `skipped` by reason, never silently lost."""
    from components.text_example_gen import documents as data_documents
    from components.text_example_gen import readers, transforms
    skipped = skipped if skipped is not None else collections.Counter()
    _, files = transforms.list_input_files(data.input, data.exclude)
    config = readers.ReaderConfig(
        format=data.format, document=data.document, separator=data.separator.encode("utf-8"),
        text_field=data.text_field, max_document_bytes=data.max_document_bytes,
        range_bytes=data.range_bytes)
    for unit in readers.plan_units(files, config):
        for piece in unit.pieces:
            for event in readers.read_piece(piece, config):
                if isinstance(event, data_documents.Document):
                    split = data_documents.split_for(event.id, data.eval_fraction,
                                                     data.split_salt)
                    yield Document(event.id, split, event.text.decode("utf-8"))
                elif isinstance(event, data_documents.Skipped):
                    # A file-level skip (records=0) is one file, as the data stage counts it.
                    file_level = event.reason in data_documents.FILE_REASONS
                    skipped[event.reason] += 1 if file_level else event.records


def input_fingerprint(data) -> str:
    """Content digest of the raw input (the data stage's own), or a marker when the input is not
    visible where the pipeline is compiled (a volume mounted only in the cluster)."""
    from components.text_example_gen.component import fingerprint_input
    try:
        return fingerprint_input(data)
    except FileNotFoundError:
        return "unresolved-at-compile-time"
