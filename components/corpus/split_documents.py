"""The one place a DataConfig becomes reader settings, used by the data stage and by TokenizerGen's
sample, so the tokenizer trains on exactly the documents the data stage packs (same listing,
document rules, quarantine and split)."""

from __future__ import annotations

from components.corpus import readers


def reader_config(data) -> readers.ReaderConfig:
    """The reader settings of a DataConfig."""
    return readers.ReaderConfig(
        format=data.format, document=data.document, separator=data.separator.encode("utf-8"),
        text_field=data.text_field, max_document_bytes=data.max_document_bytes,
        range_bytes=data.range_bytes, newline=getattr(data, "newline", "normalize"))
