"""The one place a DataConfig becomes reader settings, used by the data stage and by TokenizerGen's
sample, so the tokenizer trains on exactly the documents the data stage packs (same listing,
document rules, quarantine and split)."""

from __future__ import annotations

from components.corpus import readers


def reader_config(data, source=None) -> readers.ReaderConfig:
    """The reader settings of a DataConfig, or of one of its sources (a SourceConfig: its format,
    document, separator and text_field; the sizes and newline rule are the data section's)."""
    own = source if source is not None else data
    return readers.ReaderConfig(
        format=own.format, document=own.document, separator=own.separator.encode("utf-8"),
        text_field=own.text_field, max_document_bytes=data.max_document_bytes,
        range_bytes=data.range_bytes, newline=getattr(data, "newline", "normalize"))
