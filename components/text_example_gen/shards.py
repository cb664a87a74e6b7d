"""Encoding and writing shards, streamed and deterministic (plain functions, no TensorFlow).

Each work unit writes its sequences as it packs them: batches of windows are encoded into
TFRecord-framed serialized tf.train.Examples (framed_examples: numpy passes, or tfx_bsl's C++
RecordBatchToExamples framed record by record, the same bytes) and gzip-compressed into one
piece file per (split, shard) the unit touches; eval batch j of unit u goes to
shard (h(u) + j) mod num_shards, the train split to one piece per unit that order.py deals
into the shards in one random order. A final step concatenates, for each shard, the pieces in unit
order (gzip members concatenate into a valid gzip stream, read by tf.data and Beam alike).

Retry-safe: every file is written under a temporary name unique to the attempt (`tmp_name`) and
renamed into place, and assembly never deletes the pieces: a runner that re-runs a bundle (a
pre-empted worker) reads them again and writes the same bytes. The stage's executor removes the
pieces once the whole pipeline has finished.
Shard contents and order are thus functions of the input, whatever the parallelism, and no
worker ever holds more than one batch of records.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import struct
import uuid
import zlib

import numpy as np

from schemas import FEATURE
from components.common.errors import DiskFullError
from components.storage.splits import split_dir  # the owner of the split folder; shards.split_dir for the callers
from components.corpus import documents

PIECES_DIR = ".pieces"
BATCH_SEQUENCES = 1024
# zlib level of the shards (data.gzip_level). 1 deflates ~3x faster than zlib's default 6 (what
# tf.io.TFRecordWriter uses) for somewhat larger shards; any level reads the same.
GZIP_LEVEL = 6


def shard_for(unit_index: int, split: str, batch_index: int, num_shards: int) -> int:
    first = int(documents.unit_hash(f"shard:{split}:{unit_index}") * num_shards)
    return (first + batch_index) % num_shards


def encode_examples(windows: np.ndarray) -> list[bytes]:
    """(n, seq_len + 1) ids -> n serialized tf.train.Example with one int64 list `input_ids`."""
    import pyarrow as pa
    from tfx_bsl.coders import example_coder
    n, width = windows.shape
    offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
    values = pa.array(windows.astype(np.int64).ravel())
    batch = pa.RecordBatch.from_arrays([pa.ListArray.from_arrays(offsets, values)],
                                       [FEATURE])
    return example_coder.RecordBatchToExamples(batch)


_HEADERS: dict[int, bytes] = {}
_U32 = struct.Struct("<I").pack
_U64 = struct.Struct("<Q").pack


def frame_records(records: list[bytes]) -> bytes:
    """TFRecord framing: uint64 length, masked crc32c of the length, data, masked crc32c of data.
    Written by hand (with google_crc32c) so that workers need not import TensorFlow."""
    from google_crc32c import value as crc32c
    out = []
    append = out.append
    headers = _HEADERS
    for record in records:
        header = headers.get(len(record))
        if header is None:
            length = _U64(len(record))
            crc = crc32c(length)
            header = headers[len(record)] = length + _U32(
                (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)
        crc = crc32c(record)
        append(header)
        append(record)
        append(_U32((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF))
    return b"".join(out)


# ----------------------------------------------------------------------------------------------
# A batch of windows -> framed serialized Examples in numpy passes: the bytes of
# frame_records(encode_examples(windows)), without a Python step per id or per record (one
# crc32c call per record).

_KEY = FEATURE.encode("utf-8")
FEW = 32     # two-byte ids in a batch up to which _varints copies runs (else a mask)
DENSE = 8    # more than 1 id in DENSE of two bytes: tfx_bsl encodes the batch
_PREFIXES: dict[int, bytes] = {}


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _masked(crc):
    """TFRecord's masked crc32c (an int, or a uint64 array)."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record_prefix(payload: int) -> bytes:
    """Everything of one framed record before its packed ids, for `payload` bytes of ids:
    the TFRecord length and its CRC, then Example{features=1: Features{feature=1: map entry{
    key=1: FEATURE, value=2: Feature{int64_list=3: Int64List{value=1 packed}}}}}'s tags and
    lengths (protobuf's deterministic order: the map entry's key before its value)."""
    from google_crc32c import value as crc32c
    prefix = _PREFIXES.get(payload)
    if prefix is None:
        int64_list = b"\x0a" + _varint(payload)
        size = len(int64_list) + payload
        feature = b"\x1a" + _varint(size)
        size += len(feature)
        entry = b"\x0a" + _varint(len(_KEY)) + _KEY + b"\x12" + _varint(size)
        size += len(entry)
        features = b"\x0a" + _varint(size)
        size += len(features)
        example = b"\x0a" + _varint(size)
        length = _U64(size + len(example))
        prefix = _PREFIXES[payload] = (length + _U32(_masked(crc32c(length))) + example
                                       + features + entry + feature + int64_list)
    return prefix


def _varints(windows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(the protobuf varints of every id, concatenated as uint8; bytes per window) when every id
    is in [0, 2^14), i.e. takes one or two bytes (the byte tokenizer's, a vocabulary up to
    16384), and at most 1 in DENSE takes two (text mostly ASCII: specials, some UTF-8); else
    None (denser two-byte ids: tfx_bsl's C++ encoder is faster than these numpy passes)."""
    n, width = windows.shape
    v = windows.ravel()
    if v.min() < 0 or v.max() >= 1 << 14:
        return None
    two = np.flatnonzero(v > 0x7F)
    if len(two) * DENSE > len(v):
        return None
    low = v.astype(np.uint8) & np.uint8(0x7F)
    low[two] |= np.uint8(0x80)
    out = np.empty(len(v) + len(two), np.uint8)
    if len(two) > FEW:
        second = two + np.arange(1, len(two) + 1)    # where each second byte goes
        first = np.ones(len(out), bool)
        first[second] = False
        out[first] = low
        out[second] = v[two] >> 7
    else:                                      # copy the runs between two-byte ids
        begin = 0
        for k, at in enumerate(two.tolist()):
            out[begin + k:at + 1 + k] = low[begin:at + 1]
            out[at + 1 + k] = v[at] >> 7
            begin = at + 1
        out[begin + len(two):] = low[begin:]
    return out, width + np.bincount(two // width, minlength=n)


def framed_examples(windows: np.ndarray) -> bytes:
    """(n, width) ids -> n TFRecord-framed serialized tf.train.Examples, one int64 list
    FEATURE each: byte for byte frame_records(encode_examples(windows))."""
    from google_crc32c import value as crc32c
    n, width = windows.shape
    if n == 0 or width == 0:
        return frame_records(encode_examples(windows)) if n else b""
    encoded = _varints(windows)
    if encoded is None:
        return frame_records(encode_examples(windows))
    ids, payload = encoded
    distinct, which = np.unique(payload, return_inverse=True)
    prefixes = [_record_prefix(p) for p in distinct.tolist()]
    blank = b"\0\0\0\0"                                    # each record's CRC, filled below
    framing = np.frombuffer(b"".join([prefixes[k] + blank for k in which.tolist()]), np.uint8)
    prefix_len = np.array([len(p) for p in prefixes])[which]
    # Each record: its prefix, its ids, its CRC; a mask of the ids' bytes places both at once.
    parts = np.stack([prefix_len, payload, np.full(n, 4)], axis=1).ravel()
    is_id = np.repeat(np.tile(np.array([False, True, False]), n), parts)
    out = np.empty(len(is_id), np.uint8)
    out[is_id] = ids
    out[~is_id] = framing
    end = np.cumsum(parts[2::3] + parts[1::3] + parts[0::3])
    start, footer = end - (prefix_len + payload + 4), end - 4
    data = out.tobytes()
    crcs = np.fromiter(map(crc32c, map(data.__getitem__, map(slice, (start + 12).tolist(),
                                                             footer.tolist()))), np.uint64, n)
    out[(footer[:, None] + np.arange(4)).ravel()] = _masked(crcs).astype("<u4").view(np.uint8)
    return out.tobytes()


class ShardReadError(ValueError):
    """A shard that is not gzip TFRecords of the data stage's Examples."""


def _records(fh, path: str, crc32c):
    """The records of a TFRecord stream (each record's data CRC checked)."""
    while header := fh.read(12):
        if len(header) < 12:
            raise ShardReadError(f"{path}: truncated TFRecord header")
        (length,) = struct.unpack("<Q", header[:8])
        record, footer = fh.read(length), fh.read(4)
        crc = crc32c(record)
        if len(record) < length or footer != _U32(
                (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF):
            raise ShardReadError(f"{path}: truncated or corrupt TFRecord (data CRC)")
        yield record


def read_records(path: str):
    """The serialized records of one gzip TFRecord file (a shard or a piece), in file order,
    streamed."""
    from apache_beam.io.filesystem import CompressionTypes
    from google_crc32c import value as crc32c
    from components.storage.listing import beam_filesystems
    # beam_filesystems: outside a pipeline (the Evaluator, decontamination's examples: entries)
    # Beam's S3 filesystem refuses to open without pipeline options.
    with beam_filesystems().open(path, compression_type=CompressionTypes.GZIP) as fh:
        yield from _records(fh, path, crc32c)


def read_windows(path: str, batch: int = BATCH_SEQUENCES):
    """The windows of one shard (gzip TFRecords of Examples with one int64 list FEATURE), one
    int64 array each, in file order. Streams: `batch` records in memory at a time."""
    from tfx_bsl.coders import example_coder
    decoder = example_coder.ExamplesToRecordBatchDecoder()
    pending = []
    for record in read_records(path):
        pending.append(record)
        if len(pending) == batch:
            yield from _decoded(decoder, pending, path)
            pending = []
    if pending:
        yield from _decoded(decoder, pending, path)


def _decoded(decoder, records: list[bytes], path: str):
    batch = decoder.DecodeBatch(records)
    index = batch.schema.get_field_index(FEATURE)
    if index < 0:
        raise ShardReadError(f"{path}: its Examples have no {FEATURE!r} feature")
    column = batch.column(index)
    offsets, values = column.offsets.to_numpy(), column.flatten().to_numpy()
    for begin, end in zip(offsets[:-1], offsets[1:]):
        yield values[begin:end]


def _create(path: str):
    """A writable file on any Beam filesystem (local, gs://, s3://), written as given."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
    return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def tmp_name(path: str) -> str:
    """A temporary name for path unique to this attempt: two attempts never share a file."""
    return f"{path}.tmp-{uuid.uuid4().hex}"


def _rename(source: str, destination: str) -> None:
    from apache_beam.io.filesystems import FileSystems
    if FileSystems.exists(destination):  # a retried bundle: same content, replace it
        FileSystems.delete([destination])
    FileSystems.rename([source], [destination])


def discard(handle, tmp: str, error: BaseException) -> None:
    """After `error` stopped writing tmp: close it and remove it, so that no half-written file is
    left, nor its space held (on a full disk an open file keeps its blocks until it is closed,
    and the failure could not be recorded in a metadata store on the same disk). What fails
    here is added to error's notes; the caller re-raises error."""
    from apache_beam.io.filesystems import FileSystems
    for what, step in (("closing", handle.close), ("removing", lambda: FileSystems.delete([tmp]))):
        try:
            step()
        except Exception as err:   # the first error is the one raised; this one is kept as a note
            error.add_note(f"{what} {tmp} after that failed too: {err}")


@contextlib.contextmanager
def naming_disk_full(output_dir: str):
    """ENOSPC inside becomes a DiskFullError naming the stage's output folder (the run's exit 7
    message; Beam re-raises a worker's error with its text)."""
    try:
        yield
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        raise DiskFullError(
            f"no space left on device while writing the data stage's shards under {output_dir}; "
            f"nothing half-written is left there (temporary pieces removed, the stage's output "
            f"folder removed and never published)") from error


class ManifestPieceWriter:
    """A unit's quarantine records, each written to the piece file as it comes (memory: one
    record, whatever the unit quarantines); the file is created on the first record, under a
    temporary name renamed on close (a retried bundle rewrites it whole)."""

    def __init__(self, path: str):
        self.path, self._out, self._tmp, self.records = path, None, None, 0

    def write(self, record: dict) -> None:
        if self._out is None:
            self._tmp = tmp_name(self.path)
            self._out = _create(self._tmp)
        self._out.write((json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
        self.records += 1

    def close(self) -> bool:
        """True when a piece file was written."""
        if self._out is None:
            return False
        out, self._out = self._out, None
        out.close()
        _rename(self._tmp, self.path)
        return True

    def abort(self, error: BaseException) -> None:
        if self._out is not None:
            out, self._out = self._out, None
            discard(out, self._tmp, error)


class PieceWriter:
    """One gzip piece file, written to a temporary name and renamed when closed (discarded when
    writing failed: abort)."""

    def __init__(self, path: str, level: int = GZIP_LEVEL):
        self.path = path
        self._tmp = tmp_name(path)
        self._fh = _create(self._tmp)
        self._zip = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: gzip container

    def write(self, framed: bytes) -> None:
        self._fh.write(self._zip.compress(framed))

    def close(self) -> str:
        self._fh.write(self._zip.flush())
        self._fh.close()
        self._fh = None
        _rename(self._tmp, self.path)
        return self.path

    def abort(self, error: BaseException) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            discard(fh, self._tmp, error)


def piece_path(output_dir: str, unit_index: int, split: str, shard: int) -> str:
    return os.path.join(output_dir, PIECES_DIR, f"unit-{unit_index:06d}-{split}-{shard:05d}.gz")


def bucket_piece_path(output_dir: str, split: str, bucket: int, shard: int) -> str:
    """The piece of one key bucket of a split's order (order.py) that goes to `shard`."""
    return os.path.join(output_dir, PIECES_DIR, f"bucket-{split}-{bucket:07d}-{shard:05d}.gz")


def shard_path(output_dir: str, split: str, shard: int, num_shards: int) -> str:
    return os.path.join(split_dir(output_dir, split),
                        f"data_tfrecord-{shard:05d}-of-{num_shards:05d}.gz")


EMPTY_GZIP = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31).flush()


def concatenate(pieces: list[str], path: str, empty: bytes = b"") -> str:
    """Byte-concatenate pieces (in the given order) into path via a temporary name. The pieces
    stay (a retried bundle reads them again; the executor removes them after the stage). Streams
    in blocks; never holds a piece in memory."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
    if not pieces and not empty and path.startswith("s3://"):
        from components.storage import fs
        fs.s3_put(path, b"")  # Beam's S3 writer cannot write an empty object
        return path
    tmp = tmp_name(path)
    out = _create(tmp)
    try:
        if not pieces:
            out.write(empty)
        for piece in pieces:
            with FileSystems.open(piece, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
                while block := fh.read(1 << 24):
                    out.write(block)
        out.close()
    except BaseException as error:   # a full disk: nothing half-written left, its space freed
        discard(out, tmp, error)
        raise
    _rename(tmp, path)
    return path
