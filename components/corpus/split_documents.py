"""Every packable document of a DataConfig's raw input with its split, in reading order: the one
place a config becomes reader settings, used by the data stage and by TokenizerGen's sample, so
the tokenizer trains on exactly the documents the data stage packs (same listing, document rules,
quarantine and split)."""

from __future__ import annotations

import collections
from typing import Iterator

from components.common.listing import list_input_files
from components.corpus import documents, readers


def reader_config(data) -> readers.ReaderConfig:
    """The reader settings of a DataConfig."""
    return readers.ReaderConfig(
        format=data.format, document=data.document, separator=data.separator.encode("utf-8"),
        text_field=data.text_field, max_document_bytes=data.max_document_bytes,
        range_bytes=data.range_bytes, newline=getattr(data, "newline", "normalize"))


def read_split_documents(data, skipped: collections.Counter | None = None
                         ) -> Iterator[tuple[str, documents.Document]]:
    """(split, Document) for every packable document. Quarantined files and documents are
    counted in `skipped` by reason (a file-level skip is one file, as the data stage counts it),
    never silently lost."""
    skipped = skipped if skipped is not None else collections.Counter()
    _, files = list_input_files(data.input, data.exclude)
    config = reader_config(data)
    # data.dedup=exact: the first copy in reading order (the one the data stage packs) is kept.
    # Memory: one 32-byte digest per distinct document (the Beam stage keeps them in its shuffle).
    seen: set[bytes] | None = set() if getattr(data, "dedup", "exact") == "exact" else None
    for unit in readers.plan_units(files, config):
        for piece in unit.pieces:
            for event in readers.read_piece(piece, config):
                if isinstance(event, documents.Document):
                    key = documents.content_key(event.text)
                    if seen is not None:
                        if bytes.fromhex(key) in seen:
                            skipped[documents.DUPLICATE] += 1
                            continue
                        seen.add(bytes.fromhex(key))
                    yield documents.split_for(key, data.eval_fraction, data.split_salt), event
                elif isinstance(event, documents.Skipped):
                    file_level = event.reason in documents.FILE_REASONS
                    skipped[event.reason] += 1 if file_level else event.records
