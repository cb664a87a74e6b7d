"""The train split's order: one seeded, uniformly random permutation of the whole split, cut into
the train shards (plain functions, and the Beam transform that applies them).

    train piece of unit u (its windows in packing order, as ConvertUnitFn wrote them)
      ──Key──▶ every record i: key = hash(ORDER_SALT, u, i), 64 bits; bucket = key x K >> 64,
               K = ceil(train sequences / BUCKET_SEQUENCES) (a contiguous range of keys); the
               piece re-written as the unit's spill file, each run of it sorted by (bucket, key):
               one SpillRange (path, unit, start, end, count) per non-empty (bucket, run)
      ──GroupByKey (Beam's shuffle: small references only, never a record)──▶ one bucket's ranges
      ──SortWrite──▶ its ranges read (a seek and one read each), the bucket sorted by
               (key, u, i); its records take the global positions [offset(b), offset(b) + size(b)),
               offset = the sizes of the buckets before it; position p goes to shard
               k = shard_of(p): shard k holds positions [k T / S, (k + 1) T / S), so shard sizes
               differ by at most one record
      ──AssembleShards (transforms.py)──▶ shard k = its (bucket, shard) pieces in bucket order.

The total and each bucket's size come from the (unit, train records) pairs alone, each counted
once (OrderPlan; keys depend on (unit, index) only, so no record is read), not from the shuffle:
Beam's DaskRunner recomputes a side input's whole upstream in a worker and can hand values
twice. SortWrite reads each range once and checks its bucket against that size.

So the train split, read shard 0, 1, ... in file order, is the records sorted by a hash of their
(unit, index): a permutation uniformly random over the whole split (the hash as a random
function), the same for the same input whatever the parallelism. Every shard is a uniformly random
subset of the split in uniformly random order, so any prefix of any shard, and any interleave of
the shards' prefixes, is a fair sample of the split.

Memory. The shuffle carries one SpillRange per non-empty (bucket, run), not the records: at most
min(train records, runs x K), ~140 bytes pickled each. On the DirectRunner (whose GroupByKey holds
what it shuffles in memory) that is what the stage holds for the order: with seq_len 128 and 16 MB
units, a 1 GiB JSONL corpus (~8 M sequences, ~64 units x ~990 buckets) shuffles ~63 k ranges
(~12 MB) where the records took ~1.5 GB. Units and K both grow with the corpus, so the ranges
grow with its square (~1 GB at 10 GiB of corpus, still ~10x smaller than its records): an index
per spill with only bucket numbers through the shuffle would remove that; not done. Key holds one
run of a unit's records, at most SPILL_RUN_BYTES of them (about 2.5x that as Python objects for
128-token records): a unit is about data.range_bytes of input (16 MB: one run), but an
unsplittable file (gzip, Parquet, text with document=file) is one unit whatever its size, so a
unit can be cut into several runs. SortWrite holds one bucket (about BUCKET_SEQUENCES records)
plus one range.

Disk: the spill files (the train split uncompressed, plus SPILL_FRAME.size bytes a record) live
in the stage's pieces folder (shards.PIECES_DIR) beside the pieces, written under a temporary
name and renamed (a retried bundle rewrites the same bytes); the executor removes the folder once
the pipeline has finished, and a failed stage is never published. A full disk is the stage's
named error (shards.naming_disk_full), the temporary file removed. Object storage (s3://): each
range is read with one ranged GET of exactly its bytes (the raw stream, not Beam's 16 MiB
read-ahead), and each (bucket, unit) opens its spill once (a HEAD): about 2 x min(train records,
units x K) requests in all, each range records per unit / K records. 1 GiB of corpus: ~130 k
requests of ~17 KB; 10 GiB: ~13 M of ~1.7 KB, where the requests' latency dominates.

The eval split keeps the packing order (eval_split.py decodes documents back from it).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
from typing import Iterable, Iterator, NamedTuple

import apache_beam as beam

from components.text_example_gen import shards

KIND = "order"              # the piece records of train pieces: (KIND, split, 0), (unit, path, n)
SPLIT = "train"
ORDER_SALT = b"bigtrain-train-order-v1"
BUCKET_SEQUENCES = 8192     # the records one SortWrite holds (about: buckets vary by ~1%)
SPILL_RUN_BYTES = 32 << 20  # the record bytes Key sorts in memory at a time (one run)
SPILL_FRAME = struct.Struct("<QQI")   # a spilled record's head: key, index, record length


def record_key(unit: int, index: int) -> int:
    """The 64-bit sort key of record `index` of unit `unit`'s train stream."""
    digest = hashlib.blake2b(f"{unit}:{index}".encode(), digest_size=8, key=ORDER_SALT).digest()
    return int.from_bytes(digest, "big")


def bucket_count(total: int) -> int:
    return max(1, -(-total // BUCKET_SEQUENCES))


def bucket_of(key: int, buckets: int) -> int:
    return (key * buckets) >> 64


def shard_of(position: int, total: int, num_shards: int) -> int:
    """The shard of global position p: the largest k with k T // S <= p."""
    return ((position + 1) * num_shards - 1) // total


def keyed(unit: int, records: Iterable[bytes], buckets: int) -> Iterator[tuple[int, tuple]]:
    """A train piece's records -> (bucket, (key, unit, index, record)) each."""
    for index, record in enumerate(records):
        key = record_key(unit, index)
        yield bucket_of(key, buckets), (key, unit, index, record)


def bucket_sizes(units: Iterable[tuple[int, int]], total: int) -> dict[int, int]:
    """{bucket: its records} from (unit, its train records) pairs alone: the keys depend on
    (unit, index) only, so no record is read."""
    buckets, sizes = bucket_count(total), {}
    for unit, records in units:
        for index in range(records):
            bucket = bucket_of(record_key(unit, index), buckets)
            sizes[bucket] = sizes.get(bucket, 0) + 1
    return sizes


class OrderPlan(beam.CombineFn):
    """(unit, its train records) pairs -> (total, bucket_sizes): a set of the pairs, so a pair
    handed twice counts once (Beam's DaskRunner recomputes a side input's upstream in a worker
    and handed values twice: the total doubled, a shard empty, 2026-12-07)."""

    def create_accumulator(self):
        return set()

    def add_input(self, pairs, pair):
        pairs.add(tuple(pair))
        return pairs

    def merge_accumulators(self, accumulators):
        return set().union(*accumulators)

    def extract_output(self, pairs):
        total = sum(records for _, records in pairs)
        return total, bucket_sizes(sorted(pairs), total)


def bucket_pieces(bucket: list[tuple], offset: int, total: int,
                  num_shards: int) -> Iterator[tuple[int, list[bytes]]]:
    """One bucket's records (any order), at global positions from `offset` once sorted ->
    (shard, its records in order) for each shard the bucket reaches."""
    records = sorted(bucket)
    begin = 0
    while begin < len(records):
        shard = shard_of(offset + begin, total, num_shards)
        end = min(len(records), (shard + 1) * total // num_shards - offset)
        yield shard, [record for *_, record in records[begin:end]]
        begin = end


def shard_orders(pieces: list[tuple[int, list[bytes]]], num_shards: int) -> list[list[bytes]]:
    """The whole rule in memory (tests, small inputs): [(unit, its train records)] -> each train
    shard's records in file order, as the Beam transform writes them."""
    total = sum(len(records) for _, records in pieces)
    buckets: dict[int, list] = {}
    for unit, records in pieces:
        for bucket, value in keyed(unit, records, bucket_count(total)):
            buckets.setdefault(bucket, []).append(value)
    out: list[list[bytes]] = [[] for _ in range(num_shards)]
    offset = 0
    for bucket in sorted(buckets):
        for shard, records in bucket_pieces(buckets[bucket], offset, total, num_shards):
            out[shard] += records
        offset += len(buckets[bucket])
    return out


def write_piece(path: str, records: list[bytes], level: int) -> str:
    """`records` as one gzip piece at path, BATCH_SEQUENCES framed at a time; on a failure its
    temporary file is closed and removed (PieceWriter.abort) before the error goes on."""
    writer = shards.PieceWriter(path, level)
    try:
        for begin in range(0, len(records), shards.BATCH_SEQUENCES):
            writer.write(shards.frame_records(records[begin:begin + shards.BATCH_SEQUENCES]))
        return writer.close()
    except BaseException as error:
        writer.abort(error)
        raise


# ----------------------------------------------------------------------------------------------
# The spill: a unit's train records re-written in (bucket, key) order, read back a range at a time.


class SpillRange(NamedTuple):
    """One bucket's records in one run of a unit's spill file: bytes [start, end), `count` of
    them. What the shuffle carries instead of the records."""
    path: str
    unit: int
    start: int
    end: int
    count: int


def spill_path(output_dir: str, unit: int) -> str:
    """The spill file of unit `unit`'s train records (in the stage's pieces folder)."""
    return os.path.join(output_dir, shards.PIECES_DIR, f"spill-{SPLIT}-unit-{unit:06d}.bin")


class _Stored:
    """The identity in place of PieceWriter's gzip compressor: the spill is read by byte range."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return data

    @staticmethod
    def flush() -> bytes:
        return b""


class SpillWriter(shards.PieceWriter):
    """One uncompressed spill file: PieceWriter's temporary name, rename and abort; `position` is
    the bytes written so far."""

    def __init__(self, path: str):
        super().__init__(path)
        self._zip, self.position = _Stored(), 0

    def write(self, framed: bytes) -> None:
        super().write(framed)
        self.position += len(framed)


def runs(unit: int, records: Iterable[bytes], buckets: int,
         run_bytes: int = SPILL_RUN_BYTES) -> Iterator[list[tuple]]:
    """A unit's train records -> runs of (bucket, key, index, record) sorted, each run's records
    at most run_bytes (at least one record)."""
    run: list[tuple] = []
    size = 0
    for bucket, (key, _, index, record) in keyed(unit, records, buckets):
        if run and size + len(record) > run_bytes:
            run.sort()
            yield run
            run, size = [], 0
        run.append((bucket, key, index, record))
        size += len(record)
    if run:
        run.sort()
        yield run


def spill(path: str, unit: int, records: Iterable[bytes], buckets: int,
          run_bytes: int = SPILL_RUN_BYTES) -> list[tuple[int, SpillRange]]:
    """Write a unit's train records to its spill file at path, run by run, each sorted by
    (bucket, key): (bucket, its SpillRange) for each non-empty (bucket, run). Nothing is written
    for a unit without records; on a failure the temporary file is removed (PieceWriter.abort)."""
    writer, out = None, []
    try:
        for run in runs(unit, records, buckets, run_bytes):
            writer = writer or SpillWriter(path)
            for bucket, group in itertools.groupby(run, key=lambda value: value[0]):
                frames = [SPILL_FRAME.pack(key, index, len(record)) + record
                          for _, key, index, record in group]
                start = writer.position
                writer.write(b"".join(frames))
                out.append((bucket, SpillRange(path, unit, start, writer.position, len(frames))))
            del run   # freed before the next run is read: one run in memory
        if writer is not None:
            writer.close()
        return out
    except BaseException as error:
        if writer is not None:
            writer.abort(error)
        raise


def _read_exactly(raw, path: str, start: int, end: int) -> bytes:
    raw.seek(start)
    data = bytearray()
    while len(data) < end - start:
        block = raw.read(end - start - len(data))
        if not block:
            raise shards.ShardReadError(
                f"{path}: the train order's spill ends at byte {start + len(data)}, before the "
                f"range [{start}, {end}) the shuffle named")
        data += block
    return bytes(data)


def read_spill(ranges: list[SpillRange]) -> Iterator[tuple[int, int, int, bytes]]:
    """The records of spill ranges as (key, unit, index, record), one open per file and one
    read of exactly each range's bytes (the raw stream: on s3:// one ranged GET, not Beam's
    16 MiB read-ahead buffer)."""
    from apache_beam.io.filesystem import CompressionTypes
    from components.storage.listing import beam_filesystems
    for path, group in itertools.groupby(sorted(ranges), key=lambda spilled: spilled.path):
        with beam_filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            raw = getattr(fh, "raw", fh)
            for spilled in group:
                yield from _records(spilled, _read_exactly(raw, path, spilled.start, spilled.end))


def _records(spilled: SpillRange, data: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    at, count, head = 0, 0, SPILL_FRAME.size
    while at + head <= len(data):
        key, index, length = SPILL_FRAME.unpack_from(data, at)
        yield key, spilled.unit, index, data[at + head:at + head + length]
        at, count = at + head + length, count + 1
    if at != len(data) or count != spilled.count:
        raise shards.ShardReadError(
            f"{spilled.path}: the train order's spill range [{spilled.start}, {spilled.end}) "
            f"holds {count} whole records, not the {spilled.count} written (a corrupt spill)")


# ----------------------------------------------------------------------------------------------
# The Beam steps.


class KeyFn(beam.DoFn):
    """A train piece record -> its unit's spill file written, (bucket, SpillRange) for each
    non-empty (bucket, run). Holds one run (SPILL_RUN_BYTES) of records."""

    def __init__(self, output_dir: str, run_bytes: int = SPILL_RUN_BYTES):
        self._output_dir, self._run_bytes = output_dir, run_bytes

    def process(self, element, total):
        _, (unit, path, _) = element
        # A full disk: exit 7 naming the stage's folder, no temporary spill left (as SortWriteFn)
        with shards.naming_disk_full(self._output_dir):
            yield from spill(spill_path(self._output_dir, unit), unit, shards.read_records(path),
                             bucket_count(total), self._run_bytes)


class SortWriteFn(beam.DoFn):
    """(bucket, its records (key, unit, index, record)) -> its (bucket, shard) pieces:
    (("shard", train, k), (bucket, path)). Holds the bucket."""

    def __init__(self, output_dir: str, num_shards: int, gzip_level: int):
        self._output_dir, self._num_shards, self._gzip_level = output_dir, num_shards, gzip_level
        self._offsets: tuple[int, dict[int, int]] | None = None

    def _offset(self, bucket: int, sizes: dict[int, int]) -> int:
        if self._offsets is None or self._offsets[0] != id(sizes):
            offsets, running = {}, 0
            for b in sorted(sizes):
                offsets[b], running = running, running + sizes[b]
            self._offsets = (id(sizes), offsets)
        return self._offsets[1][bucket]

    def process(self, element, sizes, total):
        bucket, values = element
        offset = self._offset(bucket, sizes)
        # A full disk: exit 7 naming the stage's folder, no temporary piece left (as ConvertUnitFn)
        with shards.naming_disk_full(self._output_dir):
            written = [(shard, write_piece(
                shards.bucket_piece_path(self._output_dir, SPLIT, bucket, shard), records,
                self._gzip_level))
                for shard, records in bucket_pieces(list(values), offset, total, self._num_shards)]
        for shard, path in written:
            yield ("shard", SPLIT, shard), (bucket, path)


class SpillSortWriteFn(SortWriteFn):
    """(bucket, its SpillRanges) -> SortWriteFn of the records the ranges hold."""

    def process(self, element, sizes, total):
        bucket, ranges = element
        # Each range once (a runner that re-runs Key, as Beam's DaskRunner does for a side
        # input's upstream, hands the same range again), then checked against the bucket's size
        # counted from the units alone (bucket_sizes): a range lost or doubled is a named error.
        records = list(read_spill(sorted(set(ranges))))
        if len(records) != sizes.get(bucket):
            raise shards.ShardReadError(
                f"train order bucket {bucket}: its spill ranges hold {len(records)} records, "
                f"the units' keys put {sizes.get(bucket)} in it (a spill range lost or doubled)")
        yield from super().process((bucket, records), sizes, total)


class OrderTrain(beam.PTransform):
    """Piece records -> the same, the train pieces replaced by the ordered (bucket, shard) ones."""

    def __init__(self, output_dir: str, num_shards: int, gzip_level: int = shards.GZIP_LEVEL):
        super().__init__()
        self._key = KeyFn(output_dir)
        self._write = SpillSortWriteFn(output_dir, num_shards, gzip_level)

    def expand(self, pieces):
        # Two filters, not one Partition: Beam's DaskRunner (2.72) hands every tagged output of
        # a DoFn to each consumer (tests/components/test_dask_runner.py runs this on Dask).
        train = pieces | "TrainPieces" >> beam.Filter(lambda record: record[0][0] == KIND)
        rest = pieces | "OtherPieces" >> beam.Filter(lambda record: record[0][0] != KIND)
        # The total and the bucket sizes from the (unit, records) pairs alone, in one combine
        # with no side input (OrderPlan): on the DaskRunner a side input computed from another
        # side input saw its values twice (2026-12-07: 2 buckets counted for 1).
        plan = (train | "UnitRecords" >> beam.Map(lambda record: (record[1][0], record[1][2]))
                | "Plan" >> beam.CombineGlobally(OrderPlan()))
        total = beam.pvalue.AsSingleton(plan | "Total" >> beam.Map(lambda both: both[0]))
        sizes = beam.pvalue.AsSingleton(plan | "Sizes" >> beam.Map(lambda both: both[1]))
        buckets = (train | "Key" >> beam.ParDo(self._key, total=total)
                   | "GroupByBucket" >> beam.GroupByKey())
        ordered = buckets | "SortWrite" >> beam.ParDo(self._write, sizes=sizes, total=total)
        return (ordered, rest) | "WithOrdered" >> beam.Flatten()
