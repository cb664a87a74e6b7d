"""Which strategy, replica count, XLA setting and thread pools train the default preset fastest on
a machine without GPUs (issue 58, item 2: the CPU defaults are the ones measured fastest here).

    .venv/bin/python benchmarks/cpu_defaults.py [--preset tiny] [--steps 300] [--rounds 2]

Each variant is bigtrain's own training loop (components/training/loop.py train, as
benchmarks/train_throughput.py runs it) on a random byte shard, in a fresh process (the CPU's
split into logical devices is fixed per process), the preset's model, batch and sequence length.
Variants alternate, in reversed order every other round, so a machine that speeds up or slows
down during the run touches each alike. Per variant: steady tokens/s (wall, and per CPU-second of
the process: steadier on a shared machine), the first step (trace, and with XLA the compile), and
the time a run of the preset's own train_steps would take (first step + steps at the steady rate).
Prints the machine, every figure, and the fastest variant by CPU-second and by wall.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._machine import describe  # noqa: E402

# name -> runtime overrides. "mirrored-2" is the default before 2026-12-07 (two logical CPU
# replicas, XLA off on CPU).
VARIANTS = {
    "mirrored-2": ("runtime.strategy=mirrored", "runtime.cpu_replicas=2", "runtime.xla=off"),
    "mirrored-2-xla": ("runtime.strategy=mirrored", "runtime.cpu_replicas=2", "runtime.xla=on"),
    "mirrored-1": ("runtime.strategy=mirrored", "runtime.cpu_replicas=1", "runtime.xla=off"),
    "mirrored-1-xla": ("runtime.strategy=mirrored", "runtime.cpu_replicas=1", "runtime.xla=on"),
    "one_device": ("runtime.strategy=one_device", "runtime.xla=off"),
    "one_device-xla": ("runtime.strategy=one_device", "runtime.xla=on"),
    # The default since 2026-12-07 (one replica, XLA) under TensorFlow's own thread pools, and
    # with the pools set (THREADS): does the thread setting matter?
    "default": ("runtime.xla=auto",),
    "default-intra2-inter1": ("runtime.xla=auto",),
    "default-intra1-inter1": ("runtime.xla=auto",),
}
# name -> (intra-op, inter-op) threads, set before TensorFlow starts (tf.config.threading); the
# other variants keep TensorFlow's defaults (0: TensorFlow picks from the cores it sees).
THREADS = {"default-intra2-inter1": (2, 1), "default-intra1-inter1": (1, 1)}


def child(preset: str, overrides: list[str], steps: int, threads: tuple[int, int] | None) -> dict:
    """One variant in this process: bigtrain's loop, steady rates and the first step's cost."""
    import time
    if threads:
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(threads[0])
        tf.config.threading.set_inter_op_parallelism_threads(threads[1])
    from benchmarks._shards import write_random_shard
    from benchmarks.train_throughput import WARMUP_STEPS, bigtrain_run
    from components.config import build_config
    from components.training.strategy import cpu_devices_needed, ensure_cpu_replicas
    config = build_config(preset, overrides=overrides)
    if cpu_devices_needed(config.runtime):
        ensure_cpu_replicas(cpu_devices_needed(config.runtime))
    with tempfile.TemporaryDirectory() as workdir:
        shard = write_random_shard(os.path.join(workdir, "train.gz"),
                                   config.train.global_batch_size * 64, config.data.seq_len)
        start = time.perf_counter()
        run = bigtrain_run(config, shard, workdir, steps, "CPU:0")
        total = time.perf_counter() - start
    steady_s = steps * run.seconds_per_step
    first_s = max(0.0, total - steady_s - (WARMUP_STEPS - 1) * run.seconds_per_step)
    return {"tokens_per_s": run.tokens_per_s, "tokens_per_cpu_s": run.tokens_per_cpu_s,
            "first_step_s": first_s, "preset_steps": config.train.train_steps,
            "preset_run_s": first_s + config.train.train_steps * run.seconds_per_step}


def measure(name: str, preset: str, steps: int) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", name, "--preset", preset,
               "--steps", str(steps)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):,.0f} +- {sd:,.0f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=list(VARIANTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.preset, list(VARIANTS[args.child]), args.steps,
                               THREADS.get(args.child))))
        return
    print(describe())
    results = {name: [] for name in args.only}
    for round_ in range(args.rounds):
        order = args.only if round_ % 2 == 0 else list(reversed(args.only))
        for name in order:
            results[name].append(measure(name, args.preset, args.steps))
            r = results[name][-1]
            print(f"round {round_ + 1} {name:15s} {r['tokens_per_s']:9,.0f} tokens/s "
                  f"{r['tokens_per_cpu_s']:9,.0f} per CPU-s, first step {r['first_step_s']:5.1f} s",
                  flush=True)
    print(f"\npreset {args.preset}, {args.steps} steady steps, {args.rounds} rounds (mean +- sd)")
    print("| variant | tokens/s (wall) | tokens per CPU-s | first step s | a run of the preset's steps, s |")
    print("|---|---|---|---|---|")
    for name, rows in results.items():
        print(f"| {name} | {summary(rows, 'tokens_per_s')} | {summary(rows, 'tokens_per_cpu_s')} | "
              f"{statistics.mean(r['first_step_s'] for r in rows):.1f} | "
              f"{statistics.mean(r['preset_run_s'] for r in rows):.1f} |")
    for key in ("tokens_per_cpu_s", "preset_run_s"):
        best = (max if key == "tokens_per_cpu_s" else min)(
            results, key=lambda n: statistics.mean(r[key] for r in results[n]))
        print(f"best by {key}: {best}")


if __name__ == "__main__":
    main()
