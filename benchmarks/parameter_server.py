"""runtime.strategy=parameter_server against multi_worker_mirrored on the same 2 workers: tokens/s
and final loss of one short run each, on one machine (loopback ports), runs alternated.

Each job is real processes, as deployed: `bigtrain plumbing train-worker` x 2 with
multi_worker_mirrored; `bigtrain plumbing ps-task` x 2 ps + 2 workers and the chief's
`train-worker` with parameter_server. The train split is this repository's own text (docs and
Python sources, byte tokens), so the loss falls. Reported per job: wall seconds from the first
process start to the last exit (imports, tracing and the chief's export included), the training
loop's tokens/s as the job reports it, CPU-s of all its processes, and the final loss (the
mirrored job: the last logged step's; parameter servers: the mean of the last round's steps,
each on its own batch and possibly stale weights: a noisier figure).

    python benchmarks/parameter_server.py [--steps 60] [--repeats 2]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIGTRAIN = os.path.join(os.path.dirname(sys.executable), "bigtrain")
SEQ_LEN, BATCH = 64, 16
SETTINGS = [f"data.seq_len={SEQ_LEN}", "model.n_layer=2", "model.d_model=64", "model.n_head=2",
            f"train.global_batch_size={BATCH}", "train.warmup_steps=5",
            "train.learning_rate=3e-3", "train.min_learning_rate=3e-4", "train.log_every=10",
            "train.shuffle_buffer=256"]


def write_examples(folder: str) -> str:
    """An Examples folder whose Split-train holds this repository's text as byte sequences."""
    import numpy as np
    import tensorflow as tf
    from components.text_example_gen import shards as shard_files
    from components.tokenizer.byte_level import BOS_ID
    text = b"".join(open(p, "rb").read() for p in sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")) + glob.glob(os.path.join(ROOT, "components", "*", "*.py"))))
    ids = np.frombuffer(text, np.uint8).astype(np.int64)
    os.makedirs(os.path.join(folder, "Split-train"))
    with tf.io.TFRecordWriter(os.path.join(folder, "Split-train", "part-0.gz"), options="GZIP") as w:
        for start in range(0, len(ids) - SEQ_LEN, SEQ_LEN):
            window = np.concatenate([[BOS_ID], ids[start:start + SEQ_LEN]])
            w.write(shard_files.encode_examples(window[None])[0])
    return folder


def _env(cluster: dict, job: str, index: int) -> dict:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": index}}))


def _ports(count: int) -> list[str]:
    import portpicker
    return [f"localhost:{portpicker.pick_unused_port()}" for _ in range(count)]


def _train_args(examples: str, out: str, strategy: str, steps: int) -> list[str]:
    sets = [*SETTINGS, f"train.train_steps={steps}", f"train.checkpoint_every={steps}",
            f"runtime.strategy={strategy}"]
    return [BIGTRAIN, "plumbing", "train-worker", "--examples", examples, "--out", out,
            *[arg for item in sets for arg in ("--set", item)]]


def _summary(process) -> dict:
    out, err = process.communicate()
    if process.returncode:
        raise RuntimeError(f"a worker failed ({process.returncode}): {err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def mirrored_job(examples: str, work: str, steps: int) -> dict:
    cluster = {"worker": _ports(2)}
    workers = [subprocess.Popen(_train_args(examples, os.path.join(work, f"w{i}"),
                                            "multi_worker_mirrored", steps),
                                env=_env(cluster, "worker", i), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for i in range(2)]
    return [_summary(w) for w in workers][0]


def parameter_server_job(examples: str, work: str, steps: int) -> dict:
    cluster = {"ps": _ports(2), "worker": _ports(2), "chief": _ports(1)}
    servers = [subprocess.Popen([BIGTRAIN, "plumbing", "ps-task"], env=_env(cluster, job, i),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for job in ("ps", "worker") for i in range(2)]
    try:
        chief = subprocess.Popen(_train_args(examples, os.path.join(work, "chief"),
                                             "parameter_server", steps),
                                 env=_env(cluster, "chief", 0), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        return _summary(chief)
    finally:
        for server in servers:
            server.kill()
            server.wait()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(name: str, job, examples: str, steps: int) -> dict:
    cpu, start = _children_cpu(), time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        summary = job(examples, work, steps)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    figures = dict(job=name, wall_s=wall, cpu_s=cpu, steps=summary["steps"],
                   loop_tokens_per_s=summary.get("tokens_per_second", float("nan")),
                   job_tokens_per_s=summary["steps"] * BATCH * SEQ_LEN / wall,
                   final_loss=summary["final_loss"])
    print(f"{name:24s} {wall:6.1f} s wall {cpu:6.1f} CPU-s  loop {figures['loop_tokens_per_s']:7.0f} "
          f"tokens/s  job {figures['job_tokens_per_s']:6.0f} tokens/s  final loss "
          f"{figures['final_loss']:.3f} ({summary['steps']} steps)", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(describe(), f"load average {os.getloadavg()[0]:.1f}", time.strftime("%Y-%m-%d %H:%M"))
    with tempfile.TemporaryDirectory() as folder:
        examples = write_examples(folder)
        for _ in range(args.repeats):   # alternated, back to back
            measure("multi_worker_mirrored", mirrored_job, examples, args.steps)
            measure("parameter_server", parameter_server_job, examples, args.steps)
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
