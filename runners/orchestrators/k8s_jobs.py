"""Kubernetes manifests of the multi-worker training job (`bigtrain compile rayjob|tfjob --out
FILE.yaml`), generated from the config, never written by hand. Each is a YAML stream of two
documents: a ConfigMap holding the resolved config (mounted at CONFIG_DIR, given to bigtrain as
--config) and the job.

rayjob: a KubeRay `RayJob` (ray.io/v1). Its entrypoint, on the head, is `bigtrain run` with
runtime.cluster=ray and runtime.ray.address=auto: the whole pipeline, its Trainer a Ray Train job
of runtime.ray.workers workers, one per worker pod with runtime.ray's resources; the head holds no
CPU for training workers. tfjob: a Kubeflow `TFJob` (kubeflow.org/v1) of runtime.ray.workers
Worker replicas, each `bigtrain plumbing train-worker` (worker 0 the chief) with the operator's
TF_CONFIG: all a bigtrain worker needs. Every pod mounts the cluster volume (VOLUME_CLAIM at
VOLUME_DIR) where the home, pipeline root and checkpoints are."""

from __future__ import annotations

import dataclasses
import math

import yaml

from components import config as config_lib
from components.config.loading import CONFIG_FILE

CONFIG_DIR, CONFIG_KEY = "/etc/bigtrain", CONFIG_FILE   # the resolved config, as in a run folder
VOLUME_DIR, VOLUME_CLAIM = "/mnt/bigtrain", "bigtrain"   # config_lib.SCHEDULED_PIPELINE_ROOT's volume
HOME = f"{VOLUME_DIR}/home"
RAY_VERSION = "2.55.1"   # the lock's ray
TARGETS = ("rayjob", "tfjob")


def job_config(config: config_lib.Config, target: str) -> config_lib.Config:
    """The config the job runs: multi_worker_mirrored; on Ray, runtime.cluster=ray at `auto`
    (the RayJob's own cluster); the home on the cluster volume."""
    runtime = dataclasses.replace(
        config.runtime, strategy="multi_worker_mirrored",
        cluster="ray" if target == "rayjob" else "local",
        ray=dataclasses.replace(config.runtime.ray, address="auto"))
    return dataclasses.replace(config, runtime=runtime,
                               paths=dataclasses.replace(config.paths, home=HOME))


def _volumes(name: str) -> tuple[list, list]:
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
              {"name": "data", "mountPath": VOLUME_DIR}]
    volumes = [{"name": "config", "configMap": {"name": name}},
               {"name": "data", "persistentVolumeClaim": {"claimName": VOLUME_CLAIM}}]
    return mounts, volumes


def _resources(ray_config) -> dict:
    """One training worker's pod resources (runtime.ray.cpus_per_worker, gpus_per_worker)."""
    limits = {"cpu": str(ray_config.cpus_per_worker), "memory": "8Gi"}
    if ray_config.gpus_per_worker:
        limits["nvidia.com/gpu"] = math.ceil(ray_config.gpus_per_worker)
    return {"requests": dict(limits), "limits": limits}


def _pod(name: str, container: dict) -> dict:
    mounts, volumes = _volumes(name)
    return {"spec": {"containers": [dict(container, volumeMounts=mounts)], "volumes": volumes}}


def config_map(config: config_lib.Config, name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {CONFIG_KEY: yaml.safe_dump(config_lib.to_dict(config), sort_keys=False)}}


def rayjob(config: config_lib.Config, name: str) -> dict:
    image, ray_config = config.orchestrator.image, config.runtime.ray
    worker = {"name": "ray-worker", "image": image, "resources": _resources(ray_config)}
    head = {"name": "ray-head", "image": image,
            "resources": {"requests": {"cpu": "1", "memory": "8Gi"},
                          "limits": {"cpu": "2", "memory": "8Gi"}}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name},
            "spec": {
                "entrypoint": f"bigtrain --home {HOME} run --config {CONFIG_DIR}/{CONFIG_KEY}",
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": {
                    "rayVersion": RAY_VERSION,
                    # num-cpus 0: the pipeline's driver runs there, no training worker
                    "headGroupSpec": {"rayStartParams": {"num-cpus": "0"},
                                      "template": _pod(name, head)},
                    "workerGroupSpecs": [{
                        "groupName": "train", "replicas": ray_config.workers,
                        "minReplicas": ray_config.workers, "maxReplicas": ray_config.workers,
                        "rayStartParams": {"num-cpus": str(ray_config.cpus_per_worker)},
                        "template": _pod(name, worker)}]}}}


def tfjob(config: config_lib.Config, name: str, examples: str, out: str) -> dict:
    ray_config = config.runtime.ray
    command = ["bigtrain", "plumbing", "train-worker", "--config", f"{CONFIG_DIR}/{CONFIG_KEY}",
               "--examples", examples, "--out", out]
    container = {"name": "tensorflow", "image": config.orchestrator.image, "command": command,
                 "resources": _resources(ray_config)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
            "spec": {"runPolicy": {"cleanPodPolicy": "None"},
                     "tfReplicaSpecs": {"Worker": {"replicas": ray_config.workers,
                                                   "restartPolicy": "OnFailure",
                                                   "template": _pod(name, container)}}}}


def write_manifests(config: config_lib.Config, target: str, out_file: str,
                    examples: str | None = None, train_out: str | None = None) -> str:
    """Writes the ConfigMap and the `target` job to out_file; returns its path. tfjob needs
    examples (an Examples artifact's folder on the volume)."""
    if target not in TARGETS:
        raise config_lib.ConfigError(f"compile target {target!r} is not one of {TARGETS}")
    job = job_config(config, target)
    config_lib.validate(job)
    name = f"{config.paths.pipeline_name}-train".lower().replace("_", "-")
    if target == "rayjob":
        manifest = rayjob(job, name)
    else:
        if not examples:
            raise config_lib.ConfigError("compile tfjob: --examples DIR (an Examples artifact's "
                                         "folder on the cluster volume) is required")
        manifest = tfjob(job, name, examples, train_out or f"{VOLUME_DIR}/train/{name}")
    with open(out_file, "w", encoding="utf-8") as fh:
        yaml.safe_dump_all([config_map(job, name), manifest], fh, sort_keys=False)
    return out_file
