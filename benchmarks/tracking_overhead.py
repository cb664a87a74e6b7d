"""Training time with TensorBoard only vs with every tracker on (issue 42: within 5%).

    python benchmarks/tracking_overhead.py                  # MLflow to a sqlite store in a temp dir
    BIGTRAIN_MLFLOW_URI=http://127.0.0.1:29100 python benchmarks/tracking_overhead.py  # a server

bigtrain's training loop (loop.train, the Trainer's) on a small CPU model (4 layers, d_model 64,
seq_len 128, batch 32), train.log_every=5 (a tracker call every 5 steps: 4x the default's rate),
STEPS steps, the two settings alternated REPEATS times in one process, the best of each kept:
- tensorboard: trackers=None, the default;
- all: tensorboard + MLflow + W&B offline (components/tracking's fan-out), the Trainer's phase
  opened before and closed after the loop, as run_fn does; timed with and without that opening
  and closing (W&B starts its service once per process: the first repeat pays it).
Prints the machine, each setting's wall and CPU seconds, and the ratios all / tensorboard.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from benchmarks._shards import write_random_shard  # noqa: E402

STEPS, REPEATS = 60, 3


def small_config():
    from components.config import build_config
    return build_config("tiny", overrides=[
        "runtime.strategy=one_device", "data.seq_len=128", "model.n_layer=4", "model.d_model=64",
        "model.n_head=4", "train.global_batch_size=32", "train.warmup_steps=1",
        f"train.train_steps={STEPS}", "train.log_every=5", f"train.checkpoint_every={STEPS}",
        "train.eval_every=0"])


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def timed(config, shard: str, workdir: str, trackers_settings: dict | None, index: int) -> dict:
    """{"loop": (wall, cpu) of loop.train, "phase": (wall, cpu) with the phase's open/close}."""
    from components.tracking.fanout import Trackers
    from components.training import loop
    run_dir = tempfile.mkdtemp(dir=workdir)
    opened = clock()
    trackers = None
    if trackers_settings:
        trackers = Trackers.from_settings(trackers_settings, {
            "run_id": f"bench-{index}", "pipeline_name": "bench", "phase": "2-train"})
        trackers.start(None, {})
    started = clock()
    loop.train(config, shard, os.path.join(run_dir, "run"), os.path.join(run_dir, "checkpoint_dir"),
               trackers=trackers)
    ended = clock()
    if trackers is not None:
        assert trackers.live, trackers.lost      # every tracker still there: it was measured
        trackers.finish("FINISHED")
    closed = clock()
    return {"loop": tuple(b - a for a, b in zip(started, ended)),
            "phase": tuple(b - a for a, b in zip(opened, closed))}


def main() -> None:
    from components.config.tracking import TrackingConfig, resolved
    print(f"machine: {describe()}")
    config = small_config()
    with tempfile.TemporaryDirectory() as workdir:
        shard = write_random_shard(os.path.join(workdir, "train-0.gz"), 256, config.data.seq_len)
        uri = os.environ.get("BIGTRAIN_MLFLOW_URI", "")
        settings = resolved(TrackingConfig(backends=("tensorboard", "mlflow", "wandb"),
                                           mlflow_uri=uri), workdir)
        print(f"{STEPS} steps, log_every 5, {REPEATS} repeats alternated; MLflow at "
              f"{settings['mlflow_uri']}, W&B offline under {settings['wandb_dir']}")
        timed(config, shard, workdir, None, -1)     # tracing and warm-up, not counted
        best = {"tensorboard": {}, "all": {}}
        for i in range(REPEATS):
            for name, s in (("tensorboard", None), ("all", settings)):
                result = timed(config, shard, workdir, s, i)
                for part, (wall, cpu) in result.items():
                    old = best[name].get(part, (float("inf"), float("inf")))
                    best[name][part] = (min(old[0], wall), min(old[1], cpu))
        for part in ("loop", "phase"):
            tb, every = best["tensorboard"][part], best["all"][part]
            print(f"{part:5s}: tensorboard {tb[0]:.2f} s wall {tb[1]:.2f} CPU-s; all backends "
                  f"{every[0]:.2f} s wall {every[1]:.2f} CPU-s; ratio {every[0] / tb[0]:.3f} wall, "
                  f"{every[1] / tb[1]:.3f} CPU")


if __name__ == "__main__":
    main()
