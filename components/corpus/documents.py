"""Documents: what a reader yields, how each is classified, and the split rule (plain functions).

A document is (id, text bytes). Its id is stable and says where it came from:
  - `data.document=file`:      the relative path                      e.g. `json/decoder.py`
  - text / JSONL by separator or line: path + byte offset             e.g. `dump.txt@1048576`
  - gzip JSONL, Parquet rows:  path + record index                    e.g. `part-0.parquet#1234`

Splitting rule. A document's split is decided by its content: sha256(salt + content_key(text)),
where content_key is the sha256 of the normalized text (CRLF -> LF, surrounding whitespace
stripped). Exact duplicates (the eight identical `__main__.py` of the stdlib, a copied file, a
repeated paragraph) always share a split, so none leaks from train into eval; editing one part of
a big file leaves its other documents' splits alone (a key from `path@offset` would reshuffle
every document after the edit); and the split does not depend on the order, listing or
parallelism.

Duplicates (data.dedup=exact, the default): among documents with the same content_key only the
first in reading order (unit index, then position in the unit) is packed; the others are counted
(`documents_skipped_duplicate`, their bytes in `bytes_duplicate`), not packed twice.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from components.config.cleaning import QUALITY_FILTERS

# Quarantine reasons. File-level (the file is not opened or not read at all):
NOT_REGULAR, UNREADABLE = "not_regular_file", "unreadable"
FILE_REASONS = (NOT_REGULAR, UNREADABLE)
# Record-level (one document, line or row; the rest of the file is still read):
EMPTY, BINARY, NOT_UTF8, TOO_LARGE = "empty", "binary", "not_utf8", "too_large"
INVALID_JSON, MISSING_FIELD, NOT_STRING = "invalid_json", "missing_field", "not_string"
TRUNCATED = "truncated_input"  # a gzip stream that ends early or is corrupt; an I/O error mid-read
DUPLICATE = "duplicate"        # data.dedup=exact: same content_key as an earlier document (counted only)
# data.dedup=near: in a MinHash LSH cluster whose representative (named in the manifest) is packed.
NEAR_DUPLICATE = "near_duplicate"
# data.decontaminate: shares an n-gram with an evaluation set (components/corpus/contamination.py).
CONTAMINATED = "contaminated"
# data.filters: failed the named quality filter (components/corpus/quality.py).
FILTER_REASONS = tuple(f"filter_{name}" for name in QUALITY_FILTERS)
DOCUMENT_REASONS = (EMPTY, BINARY, NOT_UTF8, TOO_LARGE, INVALID_JSON, MISSING_FIELD, NOT_STRING,
                    TRUNCATED, DUPLICATE, NEAR_DUPLICATE, CONTAMINATED) + FILTER_REASONS


def filter_reason(name: str) -> str:
    """The quarantine reason of a document failing quality filter `name`."""
    return f"filter_{name}"


class Document(NamedTuple):
    id: str
    text: bytes
    # Input bytes this document accounts for (its text, or its whole JSON line without the newline).
    source_bytes: int


class Skipped(NamedTuple):
    """A quarantined document (or file): where, why, how many input bytes and records."""
    location: str
    reason: str
    bytes: int
    detail: str
    records: int = 1

    def record(self) -> dict:
        return {"path": self.location, "reason": self.reason, "bytes": self.bytes,
                "records": self.records, "detail": self.detail}


class Separator(NamedTuple):
    """Input bytes between documents (separators, newlines): read, neither packed nor quarantined."""
    bytes: int


def unit_hash(text: str) -> float:
    """A stable hash of text mapped to [0, 1)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_for(key: str, eval_fraction: float, salt: str = "") -> str:
    """'eval' for about eval_fraction of keys, else 'train'; deterministic per key. The data
    stage's key is content_key(text)."""
    return "eval" if unit_hash(salt + key) < eval_fraction else "train"


def normalized(text: bytes) -> bytes:
    """The text documents are compared by: CRLF -> LF, surrounding whitespace stripped."""
    return text.replace(b"\r\n", b"\n").strip()


def content_key(text: bytes) -> str:
    """sha256 (hex) of the normalized text. The split key and the duplicate key: documents equal
    up to this normalization are one document."""
    return hashlib.sha256(normalized(text)).hexdigest()


def split_of(document: "Document", eval_fraction: float, salt: str = "") -> str:
    """The split of a document: by its content, never by where it was found."""
    return split_for(content_key(document.text), eval_fraction, salt)


def classify(text: bytes, max_document_bytes: int) -> tuple[str, str] | None:
    """None for a packable document, else (reason, detail)."""
    if len(text) > max_document_bytes:
        return TOO_LARGE, f"{len(text)} bytes > data.max_document_bytes={max_document_bytes}"
    if not text.strip():
        return EMPTY, f"{len(text)} bytes, no text" if text else "0 bytes"
    if b"\x00" in text:
        return BINARY, "contains NUL bytes"
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as err:
        return NOT_UTF8, f"not valid UTF-8 at byte {err.start}"
    return None


def check(document: Document, max_document_bytes: int) -> Document | Skipped:
    verdict = classify(document.text, max_document_bytes)
    if verdict is None:
        return document
    return Skipped(document.id, verdict[0], document.source_bytes, verdict[1])
