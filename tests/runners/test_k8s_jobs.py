"""`bigtrain compile rayjob|tfjob`: the Kubernetes manifests of the multi-worker training
(runners/orchestrators/k8s_jobs.py), read back as YAML and checked field by field against the settings given on
the command line (3 workers of 2 CPUs and 1 GPU each: not the defaults), and the embedded config
read back through bigtrain's own loader."""

import yaml

from components import config as config_lib
from runners.cli import app as cli

SIZING = ["--set", "runtime.ray.workers=3", "--set", "runtime.ray.cpus_per_worker=2",
          "--set", "runtime.ray.gpus_per_worker=1", "--set", "orchestrator.image=reg/bigtrain:7",
          "--set", "train.train_steps=111"]


def _compile(tmp_path, target, *extra):
    out = tmp_path / f"{target}.yaml"
    assert cli.main(["compile", target, "--out", str(out), *SIZING, *extra]) == 0
    config_map, job = list(yaml.safe_load_all(out.read_text()))
    (tmp_path / "config.yaml").write_text(config_map["data"]["config.yaml"])
    embedded = config_lib.build_config("tiny", str(tmp_path / "config.yaml"), [])
    pod = _pod_of(job)
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert mounts["config"] == "/etc/bigtrain" and mounts["data"] == "/mnt/bigtrain"
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "bigtrain"
    assert embedded.train.train_steps == 111 and embedded.runtime.ray.workers == 3
    assert embedded.runtime.strategy == "multi_worker_mirrored"
    return job, pod["containers"][0], embedded


def _pod_of(job):
    if job["kind"] == "RayJob":
        return job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    return job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]


def test_rayjob_runs_the_pipeline_with_the_trainer_on_its_ray_cluster(tmp_path):
    job, worker, embedded = _compile(tmp_path, "rayjob")
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    spec = job["spec"]
    assert spec["entrypoint"].split() == ["bigtrain", "--home", "/mnt/bigtrain/home", "run",
                                          "--config", "/etc/bigtrain/config.yaml"]
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == "2.55.1"
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    group = cluster["workerGroupSpecs"][0]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 3
    assert group["rayStartParams"]["num-cpus"] == "2.0"
    assert worker["image"] == "reg/bigtrain:7"
    assert worker["resources"]["limits"]["cpu"] == "2.0"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert (embedded.runtime.cluster, embedded.runtime.ray.address) == ("ray", "auto")


def test_tfjob_runs_one_train_worker_per_replica(tmp_path):
    job, worker, embedded = _compile(tmp_path, "tfjob", "--examples", "/mnt/bigtrain/ex/1")
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    replicas = job["spec"]["tfReplicaSpecs"]
    assert list(replicas) == ["Worker"] and replicas["Worker"]["replicas"] == 3
    assert worker["name"] == "tensorflow"   # the container the TFJob operator gives TF_CONFIG
    assert worker["command"] == ["bigtrain", "plumbing", "train-worker", "--config",
                                 "/etc/bigtrain/config.yaml", "--examples", "/mnt/bigtrain/ex/1",
                                 "--out", "/mnt/bigtrain/train/bigtrain-train"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert embedded.runtime.cluster == "local"


def test_tfjob_without_examples_names_the_option(tmp_path, capsys):
    assert cli.main(["compile", "tfjob", "--out", str(tmp_path / "t.yaml")]) == cli.EXIT_CONFIG
    assert "--examples" in capsys.readouterr().err
    assert not (tmp_path / "t.yaml").exists()
