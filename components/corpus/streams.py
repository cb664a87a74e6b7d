"""Byte streams -> segments, for the readers (components/corpus/readers.py): a chunked read that
survives a truncated gzip stream, range alignment on a separator, and the splitter that cuts a
stream into documents, separators, oversized documents and read errors. Plain functions, bounded
memory: at most one document (capped) plus one CHUNK_BYTES block is held.
"""

from __future__ import annotations

import zlib
from typing import Callable, Iterator

CHUNK_BYTES = 1 << 22


class ReadError(Exception):
    pass


def chunked_reader(fh) -> Callable[[int], bytes]:
    """read(n): up to n bytes; the bytes before a truncated or corrupt gzip stream (or an I/O
    error) are still returned, and the error is raised (as ReadError) on the next call."""
    failed: list[str] = []

    def read(n: int) -> bytes:
        if failed:
            raise ReadError(failed[0])
        parts, got = [], 0
        while got < n:
            try:
                part = fh.read1(n - got) if hasattr(fh, "read1") else fh.read(n - got)
            except (EOFError, OSError, zlib.error) as err:
                failed.append(f"{type(err).__name__}: {err}")
                break
            if not part:
                break
            parts.append(part)
            got += len(part)
        if failed and not parts:
            raise ReadError(failed[0])
        return b"".join(parts)
    return read


def smallest_period(separator: bytes) -> int:
    """p such that a run of the separator repeats every p bytes ("\n\n": 1, "<|eot|>": 7)."""
    return next(p for p in range(1, len(separator) + 1) if separator[p:] == separator[:-p])


def _run_end(data: bytes, i: int, separator: bytes, period: int) -> int:
    """A separator found at i, extended over its run (back-to-back or overlapping repeats):
    "\n\n\n\n" is one separator, so a document never starts inside a run, wherever a reader
    starts scanning."""
    size = len(separator)
    end = i + size
    while data[end - size + period:end + period] == separator:
        end += period
    return end


def align(fh, offset: int, separator: bytes) -> int:
    """Offset just after the separator run containing the first occurrence at or after `offset`."""
    if offset == 0:
        return 0
    period = smallest_period(separator)
    fh.seek(offset)
    data, data_at, eof = b"", offset, False
    while True:
        chunk = b"" if eof else fh.read(CHUNK_BYTES)
        eof = eof or not chunk
        data += chunk
        i = data.find(separator)
        if i >= 0:
            end = _run_end(data, i, separator, period)
            if eof or end + period <= len(data):
                return data_at + end
            continue  # the run may go on in the next block
        if eof:
            return data_at + len(data)
        keep = min(len(separator) - 1, len(data))
        data_at += len(data) - keep
        data = data[len(data) - keep:] if keep else b""


# ----------------------------------------------------------------------------------------------
# Splitting a byte stream into segments: ("doc", offset, bytes) | ("big", offset, length) |
# ("sep", length) | ("error", offset, length, detail) | ("consumed", total bytes read).


def split_stream(read, start: int, stop: int | None, separator: bytes | None,
                 cap: int) -> Iterator[tuple]:
    size = len(separator) if separator else 0
    period = smallest_period(separator) if separator else 0
    buf, buf_at, search = b"", start, 0    # buf: the current document (its tail when skipping)
    doc_start, skipping, consumed, done = start, False, 0, False
    while True:
        chunk = b""
        want = CHUNK_BYTES if stop is None else min(CHUNK_BYTES, stop - start - consumed)
        if want <= 0:
            done = True
        else:
            try:
                chunk = read(want)
            except ReadError as err:
                yield ("error", doc_start, buf_at + len(buf) - doc_start, str(err))
                yield ("consumed", consumed)
                return
            done = not chunk
            consumed += len(chunk)
        data = buf + chunk if buf else chunk
        pos, undecided = 0, -1
        while separator and (i := data.find(separator, search)) >= 0:
            end = _run_end(data, i, separator, period)
            if not done and end + period > len(data):
                undecided = i  # decide when the next block shows where the run ends
                break
            if skipping:
                yield ("big", doc_start, buf_at + i - doc_start)
                skipping = False
            elif i > pos:
                yield ("doc", doc_start, data[pos:i])
            yield ("sep", end - i)
            pos = search = end
            doc_start = buf_at + end
        if done:
            end = buf_at + len(data)
            if skipping:
                yield ("big", doc_start, end - doc_start)
            elif end > doc_start or separator is None:  # a whole file is a document, even empty
                yield ("doc", doc_start, data[pos:])
            yield ("consumed", consumed)
            return
        held = (undecided if undecided >= 0 else len(data)) - pos
        if not skipping and held > cap:
            skipping = True  # the current document is too large: drop it, keep scanning
        if undecided >= 0:
            keep_from = undecided if skipping else pos
        else:
            keep_from = max(pos, len(data) - max(size - 1, 0)) if skipping else pos
        buf, buf_at = data[keep_from:], buf_at + keep_from
        search = undecided - keep_from if undecided >= 0 else max(0, len(buf) - size + 1)
