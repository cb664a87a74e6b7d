"""Distribution strategy from RuntimeConfig."""

from __future__ import annotations

import json
import logging
import os

import tensorflow as tf

from components.config.strategy_rules import tf_config_jobs


def ensure_cpu_replicas(count: int) -> int:
    """Split the CPU into `count` logical devices (no GPU present) so MirroredStrategy has real
    replicas. Must run before TensorFlow initializes its devices; afterwards the existing split is
    kept and a warning says so. Returns the number of logical CPUs in use."""
    if tf.config.list_physical_devices("GPU"):
        return len(tf.config.list_logical_devices("CPU"))
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    except RuntimeError:
        current = len(tf.config.list_logical_devices("CPU"))
        if current < count:
            logging.warning("TensorFlow was initialized before the CPU could be split into %d "
                            "logical devices; training uses %d replica(s)", count, current)
    return len(tf.config.list_logical_devices("CPU"))


def cpu_devices_needed(runtime) -> int:
    """Logical CPU devices a run splits the CPU into on a machine without GPUs (0: no split):
    the mirrored replicas, or the pipeline stages."""
    if getattr(runtime, "pipeline_stages", 1) > 1:
        return runtime.pipeline_stages
    return runtime.cpu_replicas if runtime.strategy == "mirrored" else 0


# runtime.strategy=parameter_server: the TF_CONFIG tasks that only serve (a tf.distribute.Server
# each: components/training/parameter_server.py serve); the chief coordinates.
SERVER_ROLES = ("ps", "worker")


def parameter_server_resolver():
    """The TF_CONFIG cluster of runtime.strategy=parameter_server, checked: ps and worker tasks
    and this process's task named (a ValueError naming TF_CONFIG otherwise)."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ValueError("runtime.strategy=parameter_server needs TF_CONFIG (cluster with ps and "
                         "worker tasks, a chief, and this task) in the environment of every task")
    tf_config_jobs(raw, SERVER_ROLES, error=ValueError)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type not in (*SERVER_ROLES, "chief"):
        raise ValueError(f"runtime.strategy=parameter_server: TF_CONFIG's task type "
                         f"{resolver.task_type!r} is none of chief, ps, worker")
    return resolver


def make_strategy(runtime) -> tf.distribute.Strategy:
    name = runtime.strategy
    if getattr(runtime, "pipeline_stages", 1) > 1:
        # The stages place themselves (pipeline_stages.py); a OneDeviceStrategy scope
        # would pin every variable to its one device.
        return tf.distribute.get_strategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        # Physical, not logical: listing logical devices initializes TensorFlow, and the CPU
        # could no longer be split (a fresh train-worker process trained on 1 replica of 2).
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            return tf.distribute.MirroredStrategy()
        ensure_cpu_replicas(runtime.cpu_replicas)
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")][:runtime.cpu_replicas]
        # On CPU the default NCCL all-reduce is unavailable; reduce through the host.
        return tf.distribute.MirroredStrategy(
            devices=cpus, cross_device_ops=tf.distribute.ReductionToOneDevice())
    if name == "multi_worker_mirrored":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("runtime.strategy=multi_worker_mirrored needs TF_CONFIG (cluster and "
                             "task) in the environment of every worker")
        json.loads(os.environ["TF_CONFIG"])  # fail early on malformed JSON
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "parameter_server":
        # No variable_partitioner, ever: TF 2.16's ShardedVariable has no `handle` for the
        # gradient and breaks Checkpoint.save (docs/training.md), so each variable lives whole
        # on one ps (round robin).
        return tf.distribute.ParameterServerStrategy(parameter_server_resolver())
    raise ValueError(f"unknown runtime.strategy {name!r}")
