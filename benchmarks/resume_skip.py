"""What a resume costs on the input side, the two ways the training loop can reach the resume
point (components/training/feed.py): restore the input iterator's state saved beside the
checkpoint (the usual case), or read forward step x B records, decompressed and unparsed (another
cluster shape, no saved state, train.cache_dataset=true). Side by side in one run, on one gzip
shard written with the product's defaults (data.seq_len 128, data.gzip_level 1,
train.shuffle_buffer 2048, train.global_batch_size 32; random byte ids, so the shard hardly
compresses: a worst case for decompression):

    restore       = first batch after restoring the state saved at step S
    skip S steps  = first batch at start_step=S  -  first batch at start_step=0
    read S steps  = S batches read for training (input pipeline alone: read, parse, batch)

and the size of the saved state (it holds the shuffle buffer and the prefetched batches, so it
does not grow with S).

    python benchmarks/resume_skip.py --steps 2000       # 64,000 records, ~17 MB of ids
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from benchmarks._shards import write_random_shard  # noqa: E402
from components.storage.checkpoints import INPUT_STATE_PREFIX  # noqa: E402


def batches(shard: str, config, start_step: int = 0):
    """One device's batches of the rule in components/training/input.py."""
    import tensorflow as tf

    from components.training import input as input_lib
    t = config.train
    return input_lib.worker_batches(input_lib.plan(shard, t.global_batch_size), config.data.seq_len,
                                    t.global_batch_size, tf.distribute.InputContext(),
                                    start_step=start_step, shuffle_buffer=t.shuffle_buffer,
                                    seed=t.seed)


def first_batch_seconds(shard: str, config, start_step: int) -> float:
    start = time.perf_counter()
    next(iter(batches(shard, config, start_step)))
    return time.perf_counter() - start


def save_state(shard: str, config, steps: int, prefix: str) -> int:
    """Read `steps` batches, save the iterator's state (as feed.py does); its size in bytes."""
    import tensorflow as tf
    iterator = iter(batches(shard, config))
    for _ in range(steps):
        next(iterator)
    path = tf.train.Checkpoint(input=iterator).write(prefix)
    folder = os.path.dirname(path)
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
               if name.startswith(os.path.basename(prefix)))


def restore_seconds(shard: str, config, prefix: str) -> float:
    import tensorflow as tf
    start = time.perf_counter()
    iterator = iter(batches(shard, config))
    tf.train.Checkpoint(input=iterator).read(prefix).assert_consumed()
    next(iterator)
    return time.perf_counter() - start


def read_seconds(shard: str, config, steps: int) -> float:
    start = time.perf_counter()
    for _ in batches(shard, config).take(steps):
        pass
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps trained before the resume")
    parser.add_argument("--repeats", type=int, default=3, help="best of, alternated")
    args = parser.parse_args(argv)
    from components.config import build_config
    config = build_config("tiny")
    data, t = config.data, config.train
    records = args.steps * t.global_batch_size
    print(f"machine: {describe()}")
    with tempfile.TemporaryDirectory() as workdir:
        shard = os.path.join(workdir, "train-0.gz")
        write_random_shard(shard, records, data.seq_len, data.gzip_level)
        size = os.path.getsize(shard)
        prefix = os.path.join(workdir, "state", f"{INPUT_STATE_PREFIX}{args.steps}")
        state_bytes = save_state(shard, config, args.steps, prefix)
        skip = read = restore = float("inf")
        for _ in range(args.repeats):
            skip = min(skip, first_batch_seconds(shard, config, args.steps)
                       - first_batch_seconds(shard, config, 0))
            restore = min(restore, restore_seconds(shard, config, prefix))
            read = min(read, read_seconds(shard, config, args.steps))
    print(f"[seq_len {data.seq_len}, gzip level {data.gzip_level}, batch {t.global_batch_size}, "
          f"shuffle buffer {t.shuffle_buffer}; {records:,} records, {size / 1e6:.1f} MB shard; "
          f"best of {args.repeats}]")
    print(f"  restore the state saved at step {args.steps}, first batch: {restore:.2f} s "
          f"(state: {state_bytes / 1e6:.2f} MB on disk)")
    print(f"  skip {args.steps} steps ({records:,} records) on resume: {skip:.2f} s "
          f"({skip / args.steps * 1e6:.0f} us per step skipped, {records / skip:,.0f} records/s)")
    print(f"  read {args.steps} steps for training (input alone): {read:.2f} s "
          f"({read / args.steps * 1e6:.0f} us per step)")
    print(f"  skip / read: {skip / read:.2f}; restore / skip: {restore / skip:.3f}")


if __name__ == "__main__":
    main()
