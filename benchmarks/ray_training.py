"""The Trainer's training as a Ray Train job (runtime.cluster=ray, components/training/ray_job.py)
against the same 2 workers started by hand (`bigtrain plumbing train-worker` with TF_CONFIG on
loopback ports): the same config, data and steps; the two ways alternated, `--rounds` times each.

    make ray && python benchmarks/ray_training.py --steps 40 --rounds 2

Per run: training tokens/s of the loop (the chief's loop.train figure: steps after tracing
included, start-up excluded), and end to end (tokens / wall from launch to the chief's weights:
Ray's worker start-up, TF_CONFIG and collectives included), with the CPU-s spent: for the workers
by hand, the processes this script waited for; for Ray, the cluster's processes (raylets, GCS,
workers: their /proc utime + stime sampled every 0.5 s, found by the cluster's temp folder and
their parents) plus this driver's own. Random byte-token shards (benchmarks/_shards.py)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import children_cpu_seconds, cpu_seconds, describe  # noqa: E402
from benchmarks._shards import write_random_shard  # noqa: E402
from components.storage.splits import split_dir  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ_LEN, BATCH = 64, 16
OVERRIDES = [f"data.seq_len={SEQ_LEN}", "model.n_layer=2", "model.d_model=64", "model.n_head=2",
             "model.n_kv_head=1", f"train.global_batch_size={BATCH}", "train.warmup_steps=2",
             "train.log_every=10", "train.checkpoint_every=100000",
             "runtime.strategy=multi_worker_mirrored"]


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, own utime + stime in s) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_processes(temp_dir: str) -> dict[int, float]:
    """{pid: own CPU-s} of the cluster's processes: those whose command line names temp_dir
    (GCS, raylets, agents) and all their descendants (the workers rename themselves `ray::...`)."""
    stats, roots = {}, set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        stat = _stat(pid)
        if stat is None:
            continue
        stats[int(pid)] = stat
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if temp_dir.encode() in fh.read():
                    roots.add(int(pid))
        except OSError:
            continue
    found, grew = set(roots), True
    while grew:
        new = {pid for pid, (parent, _) in stats.items() if parent in found and pid not in found}
        found |= new
        grew = bool(new)
    return {pid: stats[pid][1] for pid in found}


class ClusterCpu(threading.Thread):
    """CPU-s the cluster's processes spend while it runs: each process's own time, sampled every
    0.5 s (Ray's raylet does not collect its workers' times when they exit, so a worker's last
    0.5 s before it exits is missed)."""

    def __init__(self, temp_dir: str):
        super().__init__(daemon=True)
        self.temp_dir, self.stop, self.start_cpu = temp_dir, threading.Event(), cluster_processes(temp_dir)
        self.last = dict(self.start_cpu)

    def run(self):
        while not self.stop.wait(0.5):
            self.last.update(cluster_processes(self.temp_dir))

    def total(self) -> float:
        self.stop.set()
        self.join()
        self.last.update(cluster_processes(self.temp_dir))
        return sum(cpu - self.start_cpu.get(pid, 0.0) for pid, cpu in self.last.items())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def by_hand(examples: str, out: str, steps: int) -> dict:
    ports = [free_port() for _ in range(2)]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    sets = [a for o in [*OVERRIDES, f"train.train_steps={steps}"] for a in ("--set", o)]
    before, started = children_cpu_seconds(), time.perf_counter()
    procs = [subprocess.Popen(
        [os.path.join(ROOT, ".venv", "bin", "bigtrain"), "plumbing", "train-worker", "--examples",
         examples, "--out", f"{out}/w{i}", *sets], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": i}}))) for i in range(2)]
    outputs = [p.communicate()[0] for p in procs]
    wall, after = time.perf_counter() - started, children_cpu_seconds()
    assert all(p.returncode == 0 for p in procs), outputs
    summary = json.loads(outputs[0].strip().splitlines()[-1])
    cpu = after - before
    return dict(loop=summary["tokens_per_second"], wall=wall, cpu=cpu, steps=summary["steps"])


def on_ray(config, examples: str, out: str, temp_dir: str) -> dict:
    from components.training import ray_job
    cluster, own0, started = ClusterCpu(temp_dir), cpu_seconds(), time.perf_counter()
    cluster.start()
    result = ray_job.train_on_ray(config, [os.path.join(split_dir(examples, "train"), "*")], [], f"{out}/model_run",
                                  f"{out}/checkpoints")
    wall = time.perf_counter() - started
    cpu = cluster.total() + cpu_seconds() - own0
    return dict(loop=result.tokens_per_second, wall=wall, cpu=cpu, steps=result.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--address", default=os.environ.get("BIGTRAIN_RAY_ADDRESS", "127.0.0.1:29200"))
    parser.add_argument("--ray-temp", default=os.path.join(ROOT, "build", "ray", "t"))
    args = parser.parse_args()
    from components.config import build_config
    config = build_config("tiny", overrides=[*OVERRIDES, f"train.train_steps={args.steps}",
                                             "runtime.cluster=ray", "runtime.ray.workers=2",
                                             f"runtime.ray.address={args.address}"])
    print(describe())
    print(f"load average at start: {os.getloadavg()}")
    tokens = args.steps * BATCH * SEQ_LEN
    with tempfile.TemporaryDirectory() as tmp:
        train_dir = split_dir(f"{tmp}/examples", "train")
        os.makedirs(train_dir)
        write_random_shard(os.path.join(train_dir, "part-0.gz"), BATCH * (args.steps + 2), SEQ_LEN)
        for round_ in range(args.rounds):
            for name in ("ray", "by hand"):
                out = f"{tmp}/{name.replace(' ', '_')}{round_}"
                run = (on_ray(config, f"{tmp}/examples", out, args.ray_temp) if name == "ray"
                       else by_hand(f"{tmp}/examples", out, args.steps))
                print(f"round {round_} {name:8s}: loop {run['loop']:8.0f} tokens/s; end to end "
                      f"{tokens / run['wall']:7.0f} tokens/s ({run['wall']:.1f} s wall, "
                      f"{run['cpu']:.1f} CPU-s, {run['steps']} steps); load {os.getloadavg()[0]:.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
