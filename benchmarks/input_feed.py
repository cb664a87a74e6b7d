"""The training loop's input (components/training/feed.py: each replica gets only its
share, prefetched to its device, in segments ending at checkpoints, the iterator state saved at
each; results fetched once per log window) against a baseline path (one host iterator of
global batches, every replica handed the whole batch to slice its share, a host sync every step:
float(loss), bool(finite)). d_model 256, 2 CPU replicas (`mirrored`), one process, one model and
one compiled step for both: blocks of --block steps alternate old, new, old, new, ... so the
drift of a shared machine hits both alike; the ratio of each adjacent pair is one sample.

    python benchmarks/input_feed.py                   # 12 pairs of 10-step blocks
    python benchmarks/train_throughput.py --input     # the same

The new path pays what the product pays: tickets released every train.checkpoint_every steps and
the input state written there (the model checkpoint itself is left out of both). Prints the machine, each path's median step time (wall and CPU), and the
median of the per-pair ratios new/old with its quartiles.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from components.storage.checkpoints import CHECKPOINT_NAME  # noqa: E402

OVERRIDES = ["runtime.strategy=mirrored", "runtime.cpu_replicas=2", "runtime.precision=float32",
             "runtime.xla=off", "train.shuffle_buffer=64", "data.seq_len=128", "model.n_layer=4",
             "model.d_model=256", "model.n_head=4", "train.warmup_steps=1", "train.log_every=20",
             "train.checkpoint_every=100", "train.train_steps=100000"]


def old_path(step_fn, dataset):
    """The baseline: global batches from one host iterator, a host sync after every step."""
    iterator = iter(dataset)

    def run(steps: int) -> None:
        for _ in range(steps):
            loss, _, finite = step_fn(iterator)
            float(loss), bool(finite)
    return run


def new_path(step_fn, feed, train):
    """loop._run_steps's input: tickets released up to the next checkpoint step, the input
    state saved at each checkpoint, results fetched every log_every steps (and at the end of a
    block)."""
    position = {"step": 0}

    def run(steps: int) -> None:
        pending = []
        for _ in range(steps):
            step = position["step"]
            if step % train.checkpoint_every == 0:
                if step:
                    feed.save(step, [f"{CHECKPOINT_NAME}-{step}"])
                feed.release(train.checkpoint_every)
            pending.append(step_fn(feed.iterator))
            position["step"] = step + 1
            if position["step"] % train.log_every == 0:
                [(float(loss), bool(finite)) for loss, _, finite in pending]
                pending = []
        [(float(loss), bool(finite)) for loss, _, finite in pending]
    return run


def timed(run, steps: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run(steps)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def main(block: int = 10, pairs: int = 12, batch: int = 16) -> None:
    from components.training.strategy import ensure_cpu_replicas
    ensure_cpu_replicas(2)                 # before TensorFlow starts: 2 logical CPU devices
    import keras

    from benchmarks._shards import write_random_shard
    from components.config import build_config
    from components.tokenizer.spec import token_spec
    from components.training import input as input_lib
    from components.training import loop, train_step
    from components.training.feed import InputFeed
    from components.training.strategy import make_strategy

    print(f"machine: {describe()}")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    config = build_config("tiny", overrides=[*OVERRIDES, f"train.global_batch_size={batch}"])
    t, seq_len = config.train, config.data.seq_len
    strategy = make_strategy(config.runtime)
    keras.utils.set_random_seed(t.seed)
    model, state, optimizer, _ = loop.build_training(config, strategy)
    step_fn = train_step.make_train_step(
        model, optimizer, strategy, state, global_batch_size=t.global_batch_size,
        accumulation_steps=t.accumulation_steps, clip_norm=t.clip_norm, dynamic_loss_scale=False,
        seed=t.seed, pad_id=token_spec(config.data).pad_id)
    with tempfile.TemporaryDirectory() as workdir:
        shard = write_random_shard(os.path.join(workdir, "train-0.gz"), 256, seq_len)
        old = old_path(step_fn, input_lib.make_dataset(shard, seq_len, t.global_batch_size,
                                                       shuffle_buffer=t.shuffle_buffer, seed=t.seed))
        with InputFeed(strategy, shard, config, workdir) as feed:
            new = new_path(step_fn, feed, t)
            old(3), new(3)                                    # trace both, fill the pipelines
            samples = [(timed(old, block), timed(new, block)) for _ in range(pairs)]
    olds, news = [s[0] for s in samples], [s[1] for s in samples]
    ratios = sorted(o[0] / n[0] for o, n in samples)          # new throughput / old
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"[d_model 256, mirrored x2 CPU, batch {t.global_batch_size}, T {seq_len}, log_every "
          f"{t.log_every}, checkpoint_every {t.checkpoint_every}; {pairs} pairs of {block}-step "
          f"blocks, alternated]")
    for name, runs in (("new: per-replica input, fetch per log window", news),
                       ("old: global batch to every replica, sync every step", olds)):
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"  {name}: median {wall * 1e3:.0f} ms/step wall, {cpu * 1e3:.0f} ms CPU; "
              f"{t.global_batch_size * seq_len / wall:,.0f} tokens/s")
    print(f"  throughput new / old, per pair: median {statistics.median(ratios):.3f}, quartiles "
          f"{quartiles[0]:.3f}-{quartiles[2]:.3f}, range {ratios[0]:.3f}-{ratios[-1]:.3f} "
          f"(target: not lower, i.e. median >= 1.0 or 1.0 within the quartiles)")
    replicas, row_bytes = 2, 2 * 4 * seq_len                   # inputs + targets, int32
    print(f"  bytes handed to each replica per step: new {t.global_batch_size // replicas * row_bytes:,}"
          f", old {t.global_batch_size * row_bytes:,} (x{replicas}: every replica got the global batch)")


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--block", type=int, default=10, help="steps per timed block")
    parser.add_argument("--pairs", type=int, default=12, help="alternated (old, new) block pairs")
    parser.add_argument("--batch", type=int, default=16, help="global batch")
    args = parser.parse_args()
    main(args.block, args.pairs, args.batch)
