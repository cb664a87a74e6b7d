"""Readers: input files -> work units -> a stream of Documents, Skipped records and Separators.

Plain functions, no Beam pipeline (Beam's file systems open an object-store path: open_regular). No
text or JSONL reader reads a whole file: each streams in CHUNK_BYTES blocks (streams.py) and holds
at most one document (capped at data.max_document_bytes) plus one block. The Parquet reader holds
one batch of up to 4,096 rows of the text column at a time (read_parquet), as pyarrow decodes it.

Work units. `plan_units` turns the sorted file list into units of about data.range_bytes each:
a large splittable file (uncompressed text or JSONL read by separator or line) becomes one unit
per byte range [k * range_bytes, (k + 1) * range_bytes); small files are batched, in path order,
into one unit. Units are a function of the file list, the file sizes and the config alone.

Range alignment. Range k owns the bytes [align(k * R), align((k + 1) * R)), where align(x) is
the offset just after the first separator occurrence that starts at or after x (0 for x = 0,
the file size when there is none). Neighbouring ranges call the same function on the same offset,
so every byte belongs to exactly one range and every document is read whole by one reader.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import zlib
from typing import Iterable, Iterator, NamedTuple

import orjson

from components.storage.fs import is_remote
from components.storage.listing import regular_size
from components.corpus import documents as docs
from components.corpus.documents import Document, Separator, Skipped
from components.corpus.streams import align, chunked_reader, split_stream

CRLF_PEEK_BYTES = 1 << 16     # a first line longer than this counts as LF
MAX_FILES_PER_UNIT = 2048
GZIP_SUFFIXES = (".gz", ".gzip")


class Piece(NamedTuple):
    relative: str
    absolute: str
    start: int            # nominal byte range (aligned by the reader); whole file: 0, None
    end: int | None
    first: bool           # the piece that counts (or quarantines) the file itself
    source: str = ""      # the data.sources name the file was listed under ("": no mixture)


class Unit(NamedTuple):
    index: int
    pieces: tuple[Piece, ...]


class ReaderConfig(NamedTuple):
    format: str
    document: str          # file | record | separator
    separator: bytes
    text_field: str
    max_document_bytes: int
    range_bytes: int
    # data.newline: `normalize` (CRLF files split on the CRLF form of a separator, and documents
    # of the text format's record/separator modes have CRLF -> LF) or `keep` (bytes as they are).
    newline: str = "normalize"


def is_gzip(path: str) -> bool:
    return path.lower().endswith(GZIP_SUFFIXES)


def boundary(config: ReaderConfig) -> bytes | None:
    """The bytes that end a document in a stream, or None when a whole file is one document."""
    if config.format == "jsonl" or (config.format == "text" and config.document == "record"):
        return b"\n"
    if config.format == "text" and config.document == "separator":
        return config.separator
    return None


def crlf_separator(fh, config: ReaderConfig, separator: bytes | None) -> bytes | None:
    """The separator to split this file on. With data.newline=normalize, a text file whose first
    line ends in CRLF is a CRLF file: every \n of the separator matches \r\n (else "\n\n" never
    occurs in it and the whole file is one document). Decided from the file's first line, so
    every range of the file uses the same separator."""
    if (config.newline != "normalize" or config.format != "text" or not separator
            or b"\n" not in separator):
        return separator
    position, head = fh.tell(), b""
    try:
        fh.seek(0)
        while b"\n" not in head and len(head) < CRLF_PEEK_BYTES:   # up to the first line end
            block = fh.read(4096)
            if not block:
                break
            head += block
    except (OSError, EOFError, zlib.error):
        pass                                       # split_stream meets and reports the error
    finally:
        fh.seek(position)
    first = head.find(b"\n")
    return separator.replace(b"\n", b"\r\n") if first > 0 and head[first - 1] == 13 else separator


def normalize_newlines(text: bytes, config: ReaderConfig) -> bytes:
    """CRLF -> LF in a record/separator document of the text format (data.newline=normalize);
    a record's lone trailing \r (a CRLF line in an LF file) goes too."""
    if config.newline != "normalize" or config.format != "text" or config.document == "file":
        return text
    text = text.replace(b"\r\n", b"\n")
    return text[:-1] if config.document == "record" and text.endswith(b"\r") else text


def plan_units(files: list[tuple[str, str]], config: ReaderConfig) -> list[Unit]:
    units: list[Unit] = []
    batch: list[Piece] = []
    batch_bytes = 0

    def flush():
        nonlocal batch, batch_bytes
        if batch:
            units.append(Unit(len(units), tuple(batch)))
        batch, batch_bytes = [], 0

    splittable = boundary(config) is not None
    for relative, absolute in files:
        size = regular_size(absolute) or 0
        if splittable and size > config.range_bytes and not is_gzip(absolute):
            flush()
            starts = range(0, size, config.range_bytes)
            for k, start in enumerate(starts):
                end = start + config.range_bytes if k < len(starts) - 1 else None
                units.append(Unit(len(units), (Piece(relative, absolute, start, end, k == 0),)))
            continue
        batch.append(Piece(relative, absolute, 0, None, True))
        batch_bytes += size
        if batch_bytes >= config.range_bytes or len(batch) >= MAX_FILES_PER_UNIT:
            flush()
    flush()
    return units


def plan_sources(sources: Iterable[tuple[str, ReaderConfig, list[tuple[str, str]]]]) -> list[Unit]:
    """Units of several named sources (name, reader settings, files) in the order given:
    plan_units per source, numbered on across sources, each piece naming its source. One source
    gives plan_units' units (the pieces then carry its name)."""
    units: list[Unit] = []
    for name, config, files in sources:
        for unit in plan_units(files, config):
            units.append(Unit(len(units), tuple(p._replace(source=name) for p in unit.pieces)))
    return units


# ----------------------------------------------------------------------------------------------
# Opening a file: never a FIFO, socket or device (opening a FIFO blocks forever).


class FileProblem(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def open_regular(path: str):
    if is_remote(path):  # an object in a store: Beam's filesystems (s3://, gs://), seekable
        from apache_beam.io.filesystem import CompressionTypes
        from components.storage.listing import beam_filesystems
        try:
            return beam_filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
        except Exception as err:  # noqa: BLE001 (BeamIOError/OSError: the file is quarantined)
            raise FileProblem(docs.UNREADABLE, f"{type(err).__name__}: {err}") from None
    try:
        st = os.stat(path)
    except OSError as err:
        raise FileProblem(docs.UNREADABLE, f"{type(err).__name__}: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode)
                else "character device" if stat.S_ISCHR(st.st_mode)
                else "block device" if stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise FileProblem(docs.NOT_REGULAR, f"{kind}: not opened")
    try:
        return open(path, "rb", buffering=0)  # reads are large and sized: no second buffer
    except OSError as err:
        raise FileProblem(docs.UNREADABLE, f"{type(err).__name__}: {err.strerror or err}") from None


# ----------------------------------------------------------------------------------------------
# Formats: segments -> Documents / Skipped / Separators.


def _json_record(location: str, line: bytes, field: str) -> Document | Skipped:
    size = len(line)
    try:   # orjson first: where it reads a string field, the json module reads the same one
        text = orjson.loads(line)[field]
        if type(text) is str:
            return Document(location, text.encode("utf-8"), size)
    except (orjson.JSONDecodeError, TypeError, KeyError, IndexError):
        pass
    # Everything else (blank lines, a missing or non-string field, invalid JSON or UTF-8, lone
    # surrogates, NaN, huge numbers): the json module's verdict and message, as before.
    if not line.strip():
        return Skipped(location, docs.EMPTY, size, "blank line")
    try:
        value = json.loads(line)
    except UnicodeDecodeError as err:
        return Skipped(location, docs.NOT_UTF8, size, f"not valid UTF-8: {err.reason}")
    except ValueError as err:
        return Skipped(location, docs.INVALID_JSON, size, f"invalid JSON: {err}")
    if not isinstance(value, dict) or field not in value or value[field] is None:
        return Skipped(location, docs.MISSING_FIELD, size, f"no field {field!r} (data.text_field)")
    text = value[field]
    if not isinstance(text, str):
        return Skipped(location, docs.NOT_STRING, size,
                       f"field {field!r} is {type(text).__name__}, not a string")
    try:
        return Document(location, text.encode("utf-8"), size)
    except UnicodeEncodeError as err:
        return Skipped(location, docs.NOT_UTF8, size, f"field {field!r}: {err.reason}")


def read_stream(piece: Piece, fh, config: ReaderConfig) -> Iterator:
    """Documents of one text/JSONL piece; the last element is ("consumed", bytes read)."""
    separator = crlf_separator(fh, config, boundary(config))
    start, stop = 0, None
    if piece.end is not None or piece.start:  # a byte range of an uncompressed file
        start = align(fh, piece.start, separator)
        stop = align(fh, piece.end, separator) if piece.end is not None else None
        if stop is not None and stop <= start:
            yield ("consumed", 0)
            return
        fh.seek(start)
    if stop is None and not isinstance(fh, gzip.GzipFile):
        # Read exactly what is there (as of now): one sized read for a small file instead of a
        # CHUNK_BYTES allocation plus an empty read.
        here = fh.tell()
        stop = fh.seek(0, os.SEEK_END)  # the size; works on a local file and a store's stream
        fh.seek(here)
    cap = config.max_document_bytes
    if config.format == "jsonl":
        cap = max(cap * 2, cap + 1024)  # JSON escapes: a line may be longer than its text
    whole_file = separator is None
    for segment in split_stream(chunked_reader(fh), start, stop, separator, cap):
        kind = segment[0]
        if kind == "consumed":
            yield segment
        elif kind == "sep":
            yield Separator(segment[1])
        else:
            location = piece.relative if whole_file else f"{piece.relative}@{segment[1]}"
            if kind == "big":
                yield Skipped(location, docs.TOO_LARGE, segment[2],
                              f"{segment[2]} bytes > data.max_document_bytes={config.max_document_bytes}"
                              + ("; set data.document=separator (or record) to split the file"
                                 if whole_file else ""))
            elif kind == "error":
                yield Skipped(location, docs.TRUNCATED, segment[2], segment[3])
            elif config.format == "jsonl":
                record = _json_record(location, segment[2], config.text_field)
                yield record if isinstance(record, Skipped) else docs.check(record, config.max_document_bytes)
            else:
                text = segment[2]          # source bytes: the raw length, \r included
                yield docs.check(Document(location, normalize_newlines(text, config), len(text)),
                                 config.max_document_bytes)


def read_parquet(piece: Piece, config: ReaderConfig) -> Iterator:
    """Rows of one Parquet file, streamed one row group batch at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    field, consumed = config.text_field, 0
    try:
        parquet = pq.ParquetFile(piece.absolute)
    except (OSError, pa.ArrowException) as err:
        yield Skipped(piece.relative, docs.UNREADABLE, 0, f"not a Parquet file: {err}", records=0)
        yield ("consumed", 0)
        return
    rows = parquet.metadata.num_rows
    schema = parquet.schema_arrow
    if field not in schema.names:
        yield Skipped(piece.relative, docs.MISSING_FIELD, 0,
                      f"no column {field!r} (data.text_field) in {schema.names}; {rows} rows",
                      records=rows)
    elif not (pa.types.is_string(schema.field(field).type) or pa.types.is_large_string(schema.field(field).type)
              or pa.types.is_binary(schema.field(field).type) or pa.types.is_large_binary(schema.field(field).type)):
        yield Skipped(piece.relative, docs.NOT_STRING, 0,
                      f"column {field!r} is {schema.field(field).type}, not a string; {rows} rows",
                      records=rows)
    else:
        row = 0
        for batch in parquet.iter_batches(batch_size=4096, columns=[field]):
            for value in batch.column(0).to_pylist():
                location = f"{piece.relative}#{row}"
                row += 1
                if value is None:
                    yield Skipped(location, docs.MISSING_FIELD, 0, f"{field!r} is null")
                    continue
                text = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
                consumed += len(text)
                yield docs.check(Document(location, text, len(text)), config.max_document_bytes)
    yield ("consumed", consumed)


def read_piece(piece: Piece, config: ReaderConfig) -> Iterator:
    """Everything one piece yields. A file-level problem (not a regular file, cannot open) is one
    Skipped with records=0 from the file's first piece (other pieces of that file yield nothing)."""
    try:
        fh = open_regular(piece.absolute)
    except FileProblem as problem:
        if piece.first:
            yield Skipped(piece.relative, problem.reason, 0, problem.detail, records=0)
        yield ("consumed", 0)
        return
    with fh:
        if config.format == "parquet":
            fh.close()
            yield from read_parquet(piece, config)
        elif is_gzip(piece.absolute):
            with gzip.GzipFile(fileobj=fh, mode="rb") as stream:
                yield from read_stream(piece, stream, config)
        else:
            yield from read_stream(piece, fh, config)
