"""Where the Trainer's training runs: runtime.cluster (`local`, the Trainer's own process, or
`ray`: a multi-worker job on a Ray cluster through Ray Train) and the Ray job's sub-section
runtime.ray, a frozen dataclass nested in RuntimeConfig (tree.py). The job itself:
components/training/ray_job.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

CLUSTERS = ("local", "ray")


@dataclass(frozen=True)
class RayConfig:
    # The cluster ray.init connects to: `auto` (a node started on this machine with `ray start`,
    # or RAY_ADDRESS), or host:port of the head's GCS (e.g. 127.0.0.1:6380, `make ray`).
    address: str = "auto"
    # Training workers (one TensorFlow worker of MultiWorkerMirroredStrategy each; Ray sets
    # every worker's TF_CONFIG) and the resources each one holds on its node.
    workers: int = 2
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    # A lost worker (killed, its node gone) restarts the whole group up to this many times; each
    # restart resumes from the last checkpoint (Ray Train's FailureConfig.max_failures).
    max_failures: int = 1


def validate_cluster(config, error) -> None:
    """runtime.cluster and runtime.ray, each broken rule an `error` naming its key."""
    runtime = config.runtime
    if runtime.cluster not in CLUSTERS:
        raise error(f"runtime.cluster: {runtime.cluster!r} is not one of {CLUSTERS}")
    ray = runtime.ray
    if ray.workers < 1:
        raise error(f"runtime.ray.workers: must be >= 1, got {ray.workers}")
    for name in ("cpus_per_worker", "gpus_per_worker"):
        if not (math.isfinite(getattr(ray, name)) and getattr(ray, name) >= 0):
            raise error(f"runtime.ray.{name}: must be a finite number >= 0, got {getattr(ray, name)}")
    if ray.max_failures < -1:
        raise error(f"runtime.ray.max_failures: must be >= 0 (or -1: no limit), got {ray.max_failures}")
    if not ray.address:
        raise error("runtime.ray.address: empty (give `auto` or the head's host:port)")
    if runtime.cluster == "ray" and runtime.strategy != "multi_worker_mirrored":
        raise error(f"runtime.cluster=ray needs runtime.strategy=multi_worker_mirrored (Ray sets "
                    f"each worker's TF_CONFIG), got runtime.strategy={runtime.strategy}")
    if runtime.cluster == "ray":
        _validate_ray_job(config, error)


def _validate_ray_job(config, error) -> None:
    """What the Ray job does not carry yet: a warm start's parent model, the trackers' live
    figures (the workers write TensorBoard's under the run's model_run folder), and the Tuner's
    trials (they train in the Tuner's own process, without a TF_CONFIG)."""
    if config.tune.trials:
        raise error(f"tune.trials={config.tune.trials} with runtime.cluster=ray: the Tuner's trials "
                    f"do not run on Ray; tune in a local run, then train here with tune.trials=0")
    if config.train.init_from != "none":
        raise error(f"train.init_from={config.train.init_from} is not supported with "
                    f"runtime.cluster=ray yet: warm-start locally (runtime.cluster=local)")
    others = [name for name in config.tracking.backends if name != "tensorboard"]
    if others:
        raise error(f"tracking.backends: {others} not supported with runtime.cluster=ray yet (the "
                    f"workers write TensorBoard's figures only): keep tensorboard alone")
