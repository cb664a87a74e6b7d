"""The train order's writes on a full disk (issue 57, item 8, for order.py's SortWriteFn, which
rewrites the whole train split): the same named error as the rest of the data stage (exit 7,
naming the stage's folder) and no temporary piece left open or on disk. A tmpfs of 64 KiB
(root only; skips elsewhere) so that the kernel itself answers ENOSPC."""

import os

import pytest

from components.common.errors import DiskFullError
from components.text_example_gen import order, shards
from tests.support.disks import small_disk


def test_a_full_disk_while_ordering_names_the_folder_and_leaves_no_temporary_piece(tmp_path):
    rng = __import__("random").Random(0)
    records = [rng.randbytes(1000) for _ in range(300)]   # ~300 KB that gzip cannot shrink
    bucket = [(order.record_key(0, i), 0, i, record) for i, record in enumerate(records)]
    with small_disk(tmp_path / "out", "64k") as out:
        pieces = os.path.join(out, shards.PIECES_DIR)
        os.makedirs(pieces)
        write = order.SortWriteFn(out, 2, shards.GZIP_LEVEL)
        with pytest.raises(DiskFullError, match=f"under {out}") as caught:
            list(write.process((0, bucket), {0: len(bucket)}, len(bucket)))
        assert isinstance(caught.value.__cause__, OSError)
        assert [name for name in os.listdir(pieces) if ".tmp-" in name] == []
