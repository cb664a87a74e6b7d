"""The train split's order: one seeded, uniformly random permutation of the whole split, cut into
the train shards (plain functions, and the Beam transform that applies them).

    train piece of unit u (its windows in packing order, as ConvertUnitFn wrote them)
      ──Key──▶ every record i: key = hash(ORDER_SALT, u, i), 64 bits; bucket = key x K >> 64,
               K = ceil(train sequences / BUCKET_SEQUENCES) (a contiguous range of keys)
      ──GroupByKey (Beam's shuffle: the only step that moves records)──▶ one bucket
      ──SortWrite──▶ the bucket sorted by (key, u, i); its records take the global positions
               [offset(b), offset(b) + size(b)), offset = the sizes of the buckets before it;
               position p goes to shard k = shard_of(p): shard k holds positions
               [k T / S, (k + 1) T / S), so shard sizes differ by at most one record
      ──AssembleShards (transforms.py)──▶ shard k = its (bucket, shard) pieces in bucket order.

So the train split, read shard 0, 1, ... in file order, is the records sorted by a hash of their
(unit, index): a permutation uniformly random over the whole split (the hash as a random
function), the same for the same input whatever the parallelism. Every shard is a uniformly random
subset of the split in uniformly random order, so any prefix of any shard, and any interleave of
the shards' prefixes, is a fair sample of the split. A worker holds one bucket (about
BUCKET_SEQUENCES records), whatever the corpus; the split goes once through Beam's shuffle.

The eval split keeps the packing order (eval_split.py decodes documents back from it).
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator

import apache_beam as beam

from components.text_example_gen import shards

KIND = "order"              # the piece records of train pieces: (KIND, split, 0), (unit, path, n)
SPLIT = "train"
ORDER_SALT = b"bigtrain-train-order-v1"
BUCKET_SEQUENCES = 8192     # the records one SortWrite holds (about: buckets vary by ~1%)


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


def unit_buckets(unit_records: tuple[int, int], total: int) -> Iterator[tuple[tuple[int, int], int]]:
    """(unit, its train records) -> ((unit, bucket), records of the unit in it) per bucket it
    reaches: the keys depend on (unit, index) only, so no record is read."""
    unit, records = unit_records
    buckets = bucket_count(total)
    counts: dict[int, int] = {}
    for index in range(records):
        bucket = bucket_of(record_key(unit, index), buckets)
        counts[bucket] = counts.get(bucket, 0) + 1
    for bucket, count in sorted(counts.items()):
        yield (unit, bucket), count


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


class KeyFn(beam.DoFn):
    """A train piece record -> (bucket, (key, unit, index, record)) per record, streamed."""

    def process(self, element, total):
        _, (unit, path, _) = element
        yield from keyed(unit, shards.read_records(path), bucket_count(total))


class SortWriteFn(beam.DoFn):
    """(bucket, records) -> its (bucket, shard) pieces: (("shard", train, k), (bucket, path))."""

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


class OrderTrain(beam.PTransform):
    """Piece records -> the same, the train pieces replaced by the ordered (bucket, shard) ones."""

    def __init__(self, output_dir: str, num_shards: int, gzip_level: int = shards.GZIP_LEVEL):
        super().__init__()
        self._write = SortWriteFn(output_dir, num_shards, gzip_level)

    def expand(self, pieces):
        # Two filters, not one Partition: Beam's DaskRunner (2.72) hands every tagged output of
        # a DoFn to each consumer (tests/components/test_dask_runner.py runs this on Dask).
        train = pieces | "TrainPieces" >> beam.Filter(lambda record: record[0][0] == KIND)
        rest = pieces | "OtherPieces" >> beam.Filter(lambda record: record[0][0] != KIND)
        # The total and the bucket sizes from (unit, records) pairs made distinct first: the
        # DaskRunner computes a side input by running its whole upstream again inside a worker,
        # where it saw every train piece twice (2026-12-07: the total doubled, shard 1 empty).
        units = (train | "UnitRecords" >> beam.Map(lambda record: record[1][:3:2])
                 | "OncePerUnit" >> beam.Distinct())
        total = beam.pvalue.AsSingleton(
            units | "Count" >> beam.Map(lambda unit: unit[1]) | "Total" >> beam.CombineGlobally(sum))
        sizes = beam.pvalue.AsDict(
            units | "UnitBuckets" >> beam.FlatMap(unit_buckets, total=total)
            | "OncePerUnitBucket" >> beam.Distinct()
            | "ByBucket" >> beam.Map(lambda item: (item[0][1], item[1]))
            | "Sizes" >> beam.CombinePerKey(sum))
        buckets = (train | "Key" >> beam.ParDo(KeyFn(), total=total)
                   | "GroupByBucket" >> beam.GroupByKey())
        ordered = buckets | "SortWrite" >> beam.ParDo(self._write, sizes=sizes, total=total)
        return (ordered, rest) | "WithOrdered" >> beam.Flatten()
