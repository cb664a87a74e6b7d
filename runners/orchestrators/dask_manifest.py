"""A Dask cluster on Kubernetes for the data stage on Beam's DaskRunner: the `DaskCluster` resource
of the dask-kubernetes operator (kubernetes.dask.org/v1), built here from the config's image
(`bigtrain plumbing dask-manifest`; docs/scale-out.md shows its output, and a test checks that
the docs still match it). Scheduler and workers run the bigtrain image (Dockerfile: bigtrain and
its lock, distributed included) and mount the volume that holds the pipeline root, since the
workers write the stage's pieces and shards into the Examples artifact's folder."""

from __future__ import annotations

SCHEDULER_PORT = 8786
MOUNT = "/mnt/bigtrain"   # components/config: SCHEDULED_PIPELINE_ROOT and serving dir live under it


def _container(name: str, image: str, args: list[str], ports: list[dict],
               resources: dict | None = None) -> dict:
    container = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "args": args,
                 **({"ports": ports} if ports else {}),
                 "volumeMounts": [{"name": "bigtrain", "mountPath": MOUNT}]}
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    return container


def _pod(container: dict, claim: str) -> dict:
    return {"containers": [container], "volumes": [
        {"name": "bigtrain", "persistentVolumeClaim": {"claimName": claim}}]}


def dask_cluster(image: str, *, workers: int = 2, name: str = "bigtrain-data",
                 claim: str = "bigtrain", worker_cpu: str = "1",
                 worker_memory: str = "4Gi") -> dict:
    """The DaskCluster: `workers` worker pods of one single-threaded worker each (Beam runs one
    bundle per thread; a unit's memory is bounded, docs/data.md), a scheduler on SCHEDULER_PORT
    behind a ClusterIP service named `name`-scheduler. A run then passes
    --beam-arg=--dask_client_address=tcp://<name>-scheduler:8786."""
    if workers < 1:
        raise ValueError(f"--workers: {workers}; a Dask cluster needs at least 1 worker")
    comm = {"name": "tcp-comm", "containerPort": SCHEDULER_PORT, "protocol": "TCP"}
    def probe(delay: int) -> dict:
        return {"tcpSocket": {"port": "tcp-comm"}, "initialDelaySeconds": delay,
                "periodSeconds": 10}
    scheduler = _container("scheduler", image, ["dask", "scheduler", "--no-dashboard"], [comm])
    scheduler.update(readinessProbe=probe(5), livenessProbe=probe(15))
    worker = _container("worker", image, [
        "dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--nthreads", "1", "--memory-limit",
        "0", "--no-dashboard"], [], {"cpu": worker_cpu, "memory": worker_memory})
    return {
        "apiVersion": "kubernetes.dask.org/v1", "kind": "DaskCluster",
        "metadata": {"name": name},
        "spec": {
            "worker": {"replicas": workers, "spec": _pod(worker, claim)},
            "scheduler": {"spec": _pod(scheduler, claim), "service": {
                "type": "ClusterIP",
                "selector": {"dask.org/cluster-name": name, "dask.org/component": "scheduler"},
                "ports": [{"name": "tcp-comm", "protocol": "TCP", "port": SCHEDULER_PORT,
                           "targetPort": "tcp-comm"}]}}}}


def manifest_yaml(image: str, **options) -> str:
    import yaml
    return yaml.safe_dump(dask_cluster(image, **options), sort_keys=False)
