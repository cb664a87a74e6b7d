"""runtime.strategy=parameter_server against multi_worker_mirrored on the same 2 workers: tokens/s
and final loss of one short run each, on one machine (loopback ports), runs alternated.

Each job is real processes, as deployed: `bigtrain plumbing train-worker` x 2 with
multi_worker_mirrored; `bigtrain plumbing ps-task` x 2 ps + 2 workers and the chief's
`train-worker` with parameter_server. The train split is this repository's own text (docs and
Python sources, byte tokens), so the loss falls. Reported per job: wall seconds from the first
process start to the last exit (imports, tracing and the chief's export included), the training
loop's tokens/s as the job reports it, CPU-s of all its processes, and the final loss (the
mirrored job: the last logged step's; parameter servers: the mean of the last round's steps,
each on its own batch and possibly stale weights: a noisier figure), and the held-out loss of
each job's final weights on the same 64 sequences of text the training never read (this
repository's tests/ sources): the like-for-like figure.

    python benchmarks/parameter_server.py [--steps 60] [--repeats 2]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import children_cpu_seconds, describe  # noqa: E402
from components.storage.splits import split_dir  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIGTRAIN = os.path.join(os.path.dirname(sys.executable), "bigtrain")
SEQ_LEN, BATCH = 64, 16
SETTINGS = [f"data.seq_len={SEQ_LEN}", "model.n_layer=2", "model.d_model=64", "model.n_head=2",
            f"train.global_batch_size={BATCH}", "train.warmup_steps=5",
            "train.learning_rate=3e-3", "train.min_learning_rate=3e-4", "train.log_every=10",
            "train.shuffle_buffer=256"]


def _write_split(folder: str, split: str, patterns: list[str], limit: int | None = None) -> str:
    """The text of the files `patterns` match (under the repository) as byte sequences of
    SEQ_LEN + 1 ids (BOS first), in folder/Split-<split>/part-0.gz."""
    import numpy as np
    import tensorflow as tf
    from components.text_example_gen import shards as shard_files
    from components.tokenizer.byte_level import BOS_ID
    names = sorted(n for pattern in patterns for n in glob.glob(os.path.join(ROOT, pattern)))
    ids = np.frombuffer(b"".join(open(n, "rb").read() for n in names), np.uint8).astype(np.int64)
    os.makedirs(split_dir(folder, split))
    path = os.path.join(split_dir(folder, split), "part-0.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for start in list(range(0, len(ids) - SEQ_LEN, SEQ_LEN))[:limit]:
            window = np.concatenate([[BOS_ID], ids[start:start + SEQ_LEN]])
            writer.write(shard_files.encode_examples(window[None])[0])
    return path


def write_examples(folder: str) -> str:
    """An Examples folder: Split-train from docs/ and components/, Split-eval 64 sequences of
    tests/ (never trained on)."""
    _write_split(folder, "train", ["docs/*.md", "components/*/*.py"])
    _write_split(folder, "eval", ["tests/training/*.py"], limit=64)
    return folder


def held_out_loss(weights_file: str, eval_file: str) -> float:
    """Mean next-token loss of the weights in weights_file on the eval sequences."""
    import numpy as np
    from components.config import build_config
    from components.model.gpt import build_model
    from components.tokenizer.spec import token_spec
    from components.training.input import make_dataset
    from components.training.train_step import masked_token_loss_sum, target_count
    config = build_config("tiny", overrides=SETTINGS)
    spec = token_spec(config.data)
    model = build_model(config.model, SEQ_LEN, "float32", "none", vocab_size=spec.vocab_size)
    saved = np.load(weights_file)
    model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])
    inputs, targets = next(iter(make_dataset(eval_file, SEQ_LEN, 64, repeat=False)))
    logits = model(inputs, training=False)
    return float(masked_token_loss_sum(targets, logits, spec.pad_id) / target_count(targets, spec.pad_id))


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
            "--weights-out", os.path.join(out + ".npz"),
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
    return dict([_summary(w) for w in workers][0], weights=os.path.join(work, "w0.npz"))


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
        return dict(_summary(chief), weights=os.path.join(work, "chief.npz"))
    finally:
        for server in servers:
            server.kill()
            server.wait()


def measure(name: str, job, examples: str, steps: int) -> dict:
    cpu, start = children_cpu_seconds(), time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        summary = job(examples, work, steps)
        wall, cpu = time.perf_counter() - start, children_cpu_seconds() - cpu
        held_out = held_out_loss(summary["weights"], os.path.join(split_dir(examples, "eval"), "part-0.gz"))
    figures = dict(job=name, wall_s=wall, cpu_s=cpu, steps=summary["steps"],
                   loop_tokens_per_s=summary.get("tokens_per_second", float("nan")),
                   job_tokens_per_s=summary["steps"] * BATCH * SEQ_LEN / wall,
                   final_loss=summary["final_loss"], held_out_loss=held_out)
    print(f"{name:24s} {wall:6.1f} s wall {cpu:6.1f} CPU-s  loop {figures['loop_tokens_per_s']:7.0f} "
          f"tokens/s  job {figures['job_tokens_per_s']:6.0f} tokens/s  final loss "
          f"{figures['final_loss']:.3f}  held-out loss {held_out:.3f} ({summary['steps']} steps)",
          flush=True)
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
