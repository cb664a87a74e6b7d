"""The train order's shuffle carries small references, never records (issue 58 item 1 follow-up:
on the DirectRunner a GroupByKey holds everything it shuffles in memory, so records through it
made the data stage's peak memory grow with the corpus: 2.15 GiB for 200 MiB of JSONL).

OrderTrain runs in a real Beam pipeline over train pieces of 2,000-byte records; every element
that reaches its GroupByKey is measured (its pickled size, a Beam distribution) and the shards it
writes are compared with order.shard_orders, the whole rule in memory. The spill is checked
against `keyed` (the bucket of each record, computed by the plain loop) with runs small enough
that a unit is cut into several, on a full disk (a 64 KiB tmpfs, root only), and through a
read-ahead buffer like Beam's S3 stream (a range costs its own bytes)."""

import io
import os
import pickle
import random

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import Metrics, MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from components.storage import listing
from components.common.errors import DiskFullError
from components.text_example_gen import order, shards
from tests.support.disks import small_disk

RECORD_BYTES, SHARDS = 2000, 3
UNITS = (3000, 5000, 1200)      # train records per unit: 9,200, so 2 buckets


def unit_records(unit: int, count: int) -> list[bytes]:
    rng = random.Random(unit)
    return [rng.randbytes(RECORD_BYTES) for _ in range(count)]


def write_pieces(out: str) -> list[tuple]:
    """The units' train pieces as ConvertUnitFn leaves them: piece records for OrderTrain."""
    os.makedirs(os.path.join(out, shards.PIECES_DIR))
    pieces = []
    for unit, count in enumerate(UNITS):
        path = shards.piece_path(out, unit, order.SPLIT, 0)
        order.write_piece(path, unit_records(unit, count), 1)
        pieces.append(((order.KIND, order.SPLIT, 0), (unit, path, count)))
    return pieces


class ShuffleVisitor(beam.pipeline.PipelineVisitor):
    """Finds the PCollection that goes into OrderTrain's GroupByKey."""

    def __init__(self):
        self.shuffled = None

    def enter_composite_transform(self, node):
        self.visit_transform(node)

    def visit_transform(self, node):
        if node.full_label.endswith("GroupByBucket"):
            self.shuffled = node.inputs[0]


def measure(element):
    Metrics.distribution("test", "shuffled_bytes").update(len(pickle.dumps(element)))


def run_order(out: str, pieces: list[tuple]):
    """OrderTrain over the pieces (one process): (what reached the shuffle: count, sum, max
    pickled bytes; the ordered piece records)."""
    p = TestPipeline(options=PipelineOptions(["--direct_running_mode=in_memory",
                                              "--direct_num_workers=1"]), blocking=True)
    ordered = p | beam.Create(pieces) | order.OrderTrain(out, SHARDS, 1)
    visitor = ShuffleVisitor()
    p.visit(visitor)
    _ = visitor.shuffled | "Measure" >> beam.Map(measure)
    listed = os.path.join(out, "ordered.txt")
    _ = (ordered | beam.Map(repr) | beam.combiners.ToList()
         | beam.Map(lambda lines: open(listed, "w").write("\n".join(lines))))
    result = p.run()
    result.wait_until_finish()
    shuffled = result.metrics().query(MetricsFilter().with_name("shuffled_bytes"))
    with open(listed) as fh:
        return shuffled["distributions"][0].committed, [eval(line) for line in fh]


def test_the_shuffle_carries_small_references_and_the_shards_are_the_rule_in_memory(tmp_path):
    out = str(tmp_path / "out")
    shuffled, ordered = run_order(out, write_pieces(out))
    total = sum(UNITS)
    buckets = order.bucket_count(total)
    assert shuffled.max < RECORD_BYTES / 4, shuffled          # references, not records
    assert shuffled.count <= len(UNITS) * buckets, shuffled   # one per (bucket, unit) here
    assert shuffled.sum < total * RECORD_BYTES / 1000, shuffled
    got: list[list[bytes]] = [[] for _ in range(SHARDS)]
    for (kind, split, shard), (bucket, path) in sorted(ordered):
        assert (kind, split) == ("shard", order.SPLIT)
        got[shard] += list(shards.read_records(path))
    expected = order.shard_orders(
        [(unit, unit_records(unit, count)) for unit, count in enumerate(UNITS)], SHARDS)
    assert [len(records) for records in got] == [len(records) for records in expected]
    assert got == expected


@pytest.mark.parametrize("run_bytes", [1 << 30, 20 * RECORD_BYTES + 1])
def test_a_spill_read_back_holds_each_buckets_records_of_the_unit(tmp_path, run_bytes):
    """One unit of 1,000 records in 2 buckets, spilled whole (one run) and in runs of 20 records:
    each bucket's ranges hold exactly its records (by `keyed`), a run at most run_bytes."""
    records = unit_records(7, 1000)
    path = str(tmp_path / "spill.bin")
    ranges = order.spill(path, 7, records, 2, run_bytes)
    expected: dict[int, set] = {}
    for bucket, value in order.keyed(7, records, 2):
        expected.setdefault(bucket, set()).add(value)
    for bucket in expected:
        mine = [spilled for b, spilled in ranges if b == bucket]
        assert set(order.read_spill(mine)) == expected[bucket]
        assert sum(spilled.count for spilled in mine) == len(expected[bucket])
    runs = -(-1000 // 20) if run_bytes < 1000 * RECORD_BYTES else 1
    assert len(ranges) <= 2 * runs and len(ranges) >= runs
    assert max(s.end - s.start for _, s in ranges) <= run_bytes + 20 * order.SPILL_FRAME.size


@pytest.mark.parametrize("damage", ["truncated", "a record's length"])
def test_a_damaged_spill_is_a_named_error(tmp_path, damage):
    path = str(tmp_path / "spill.bin")
    ranges = order.spill(path, 0, unit_records(0, 10), 1)
    with open(path, "r+b") as fh:
        if damage == "truncated":
            fh.truncate(os.path.getsize(path) - 1)
        else:                      # the first record's length field, one byte short
            fh.seek(16)
            fh.write((RECORD_BYTES - 1).to_bytes(4, "little"))
    with pytest.raises(shards.ShardReadError, match="spill.bin"):
        list(order.read_spill([spilled for _, spilled in ranges]))


def test_a_full_disk_while_spilling_names_the_folder_and_leaves_no_temporary_file(tmp_path):
    """The spill of ~300 KB that the 64 KiB disk cannot hold: the stage's named error, no
    temporary spill left (as test_order_disk_full for the bucket pieces)."""
    piece = str(tmp_path / "piece.gz")
    order.write_piece(piece, unit_records(0, 300), 1)
    with small_disk(tmp_path / "out", "64k") as out:
        pieces = os.path.join(out, shards.PIECES_DIR)
        os.makedirs(pieces)
        key = order.KeyFn(out)
        with pytest.raises(DiskFullError, match=f"under {out}") as caught:
            list(key.process(((order.KIND, order.SPLIT, 0), (0, piece, 300)), 300))
        assert isinstance(caught.value.__cause__, OSError)
        assert os.listdir(pieces) == []


class CountingRaw(io.RawIOBase):
    """A local file as an unbuffered stream that counts the bytes read from it: the part of an
    object that a ranged GET would fetch."""

    def __init__(self, path: str, counted: list[int]):
        self._fh, self._counted = open(path, "rb", buffering=0), counted

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        return self._fh.seek(offset, whence)

    def tell(self):
        return self._fh.tell()

    def readinto(self, buffer):
        n = self._fh.readinto(buffer)
        self._counted.append(n)
        return n

    def close(self):
        self._fh.close()
        super().close()


def test_a_bucket_reads_only_its_ranges_bytes_through_a_read_ahead_buffer(tmp_path, monkeypatch):
    """Beam's S3 filesystem opens an object as a 16 MiB io.BufferedReader over ranged GETs: a
    bucket's read must fetch its ranges' bytes, not a read-ahead buffer each (on object storage,
    units x K of them). The same stream here over a local file, counting the bytes read."""
    path = str(tmp_path / "spill.bin")
    ranges = order.spill(path, 3, unit_records(3, 1000), 8)
    counted: list[int] = []

    class Filesystems:
        @staticmethod
        def open(opened, compression_type=None):
            return io.BufferedReader(CountingRaw(opened, counted), buffer_size=16 << 20)

    monkeypatch.setattr(listing, "beam_filesystems", lambda: Filesystems)
    mine = [spilled for bucket, spilled in ranges if bucket == 5]
    assert len(list(order.read_spill(mine))) == sum(spilled.count for spilled in mine)
    assert sum(counted) == sum(spilled.end - spilled.start for spilled in mine) < 2 ** 20
