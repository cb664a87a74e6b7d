"""Run a compiled KFP v2 PipelineJob (`bigtrain compile kubeflow`) on this machine, one process per
task in the DAG's order, the way a KFP v2 backend runs it: `bigtrain plumbing run-kfp-spec FILE`.
For debugging a compiled spec without a cluster, and the contract test of the Kubeflow path.

What is the cluster's, unchanged: each container task runs the spec's own command and arguments
(the image's `python` is this interpreter), with `{{$}}` replaced by the ExecutorInput JSON, in
its own process, its own working folder and this environment (the S3 endpoint and credentials a
pod gets from its secret).

What is emulated (the KFP v2 driver and launcher, backend/src/v2/driver and component/launcher_v2.go
of kubeflow/pipelines, read for this):
- ExecutorInput: `inputs.parameterValues` from `runtimeValue.constant` (a spec with the legacy
  `constantValue` is refused, as the open-source driver refuses it), a non-string value of a
  STRING parameter as its JSON text; `inputs.artifacts` are the upstream task's output artifacts
  (uri, type = the producer's instanceSchema, metadata as the executor wrote it); output URIs
  `<pipeline_root>/<pipeline name>/<run id>/<task>/<execution salt>/<output key>`;
  `outputs.outputFile` a local `kfp_outputs/output_metadata.json` per task (the launcher's
  /tmp/kfp_outputs/output_metadata.json; TFX derives the task's temp folder from it).
- After a task, its ExecutorOutput artifacts are merged into its outputs (mergeRuntimeArtifacts),
  which is what MLMD hands the next task.
- Driver-only tasks (no container): an importer yields its artifactUri; a resolver queries MLMD
  (latest blessed model) and here yields no artifact: there is no MLMD, so every run resolves
  like a first run on a fresh store. The open-source KFP backend refuses resolver tasks at
  submission ("resolver not implemented yet", argocompiler/argo.go); Vertex AI runs them.
- Not emulated: the launcher's copy of input artifacts to /s3/... local paths and back (TFX reads
  and writes the s3:// URIs itself), MLMD records, caching, retries, pod resources.
"""

from __future__ import annotations

import dataclasses
import graphlib
import json
import os
import subprocess
import sys
import time
import uuid

from components.common.errors import BigtrainError
from runners.orchestrators.kubeflow import TASK_PLACEHOLDER

OUTPUT_METADATA_FILE = os.path.join("kfp_outputs", "output_metadata.json")


class KfpTaskError(BigtrainError):
    """A task of the PipelineJob failed or cannot run the way the KFP v2 backend runs it."""


@dataclasses.dataclass
class TaskResult:
    name: str
    kind: str  # container | resolver (emulated) | importer (emulated)
    seconds: float
    outputs: dict[str, list[dict]]
    executor_input: dict | None = None
    log_file: str | None = None


def load_pipeline_job(path: str) -> dict:
    """The PipelineJob JSON TFX writes (a bare PipelineSpec is wrapped, with no pipeline root)."""
    with open(path, encoding="utf-8") as fh:
        job = json.load(fh)
    return job if "pipelineSpec" in job else {"pipelineSpec": job, "runtimeConfig": {}}


def task_order(spec: dict) -> list[str]:
    """The root DAG's tasks in dependency order (dependentTasks and the producers of their
    inputs); ties in name order, so a run is repeatable."""
    tasks = spec["root"]["dag"]["tasks"]
    graph = {name: set(task.get("dependentTasks", [])) | _producers(task)
             for name, task in tasks.items()}
    sorter = graphlib.TopologicalSorter(graph)
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order += ready
        sorter.done(*ready)
    return order


def _producers(task: dict) -> set[str]:
    inputs = task.get("inputs", {})
    found = {p["taskOutputArtifact"]["producerTask"] for p in inputs.get("artifacts", {}).values()
             if "taskOutputArtifact" in p}
    return found | {p["taskOutputParameter"]["producerTask"]
                    for p in inputs.get("parameters", {}).values() if "taskOutputParameter" in p}


def run_root(job: dict, run_id: str) -> str:
    """Where a run's outputs go: the driver appends the pipeline name and the run id."""
    root = job.get("runtimeConfig", {}).get("gcsOutputDirectory", "")
    if not root:
        raise KfpTaskError("the PipelineJob has no runtimeConfig.gcsOutputDirectory (pipeline "
                           "root): compile with orchestrator.pipeline_root set")
    return f"{root.rstrip('/')}/{job['pipelineSpec']['pipelineInfo']['name']}/{run_id}"


def _component(spec: dict, task_name: str) -> dict:
    """The component a task of the root DAG runs."""
    return spec["components"][spec["root"]["dag"]["tasks"][task_name]["componentRef"]["name"]]


def _executor(spec: dict, component: dict) -> dict:
    return spec["deploymentSpec"]["executors"][component["executorLabel"]]


def input_parameters(task_name: str, task: dict, component: dict) -> dict:
    """inputs.parameterValues as the driver resolves constants (resolveInputParameter), with its
    STRING conversion (handleParamTypeValidationAndConversion)."""
    types = {k: v.get("parameterType") for k, v in
             component.get("inputDefinitions", {}).get("parameters", {}).items()}
    values = {}
    for name, spec in task.get("inputs", {}).get("parameters", {}).items():
        runtime = spec.get("runtimeValue", {})
        if "constant" not in runtime:
            raise KfpTaskError(
                f"task {task_name} parameter {name}: {sorted(spec)} {sorted(runtime)} is not a "
                "runtimeValue.constant, the only parameter the KFP v2 driver resolves here "
                "(a legacy constantValue spec needs use_pipeline_spec_2_1)")
        value = runtime["constant"]
        if types.get(name) == "STRING" and not isinstance(value, str):
            value = json.dumps(value)
        values[name] = value
    return values


def input_artifacts(task_name: str, task: dict, produced: dict) -> dict:
    artifacts = {}
    for name, spec in task.get("inputs", {}).get("artifacts", {}).items():
        if "taskOutputArtifact" not in spec:
            raise KfpTaskError(f"task {task_name} artifact input {name}: only taskOutputArtifact "
                               f"inputs are supported here, not {sorted(spec)}")
        source = spec["taskOutputArtifact"]
        artifacts[name] = {"artifacts": produced[(source["producerTask"], source["outputArtifactKey"])]}
    return artifacts


def output_artifacts(task_name: str, component: dict, root: str, salt: str) -> dict:
    """provisionOutputs: one artifact per output key, its URI under the run's root."""
    outputs = component.get("outputDefinitions", {}).get("artifacts", {})
    return {name: {"artifacts": [{"uri": f"{root}/{task_name}/{salt}/{name}",
                                  "type": spec["artifactType"],
                                  "metadata": spec.get("metadata", {})}]}
            for name, spec in outputs.items()}


def executor_input(task_name: str, job: dict, produced: dict, root: str, output_file: str) -> dict:
    spec = job["pipelineSpec"]
    task, component = spec["root"]["dag"]["tasks"][task_name], _component(spec, task_name)
    salt = uuid.uuid4().hex[:12]  # the launcher salts output URIs with the execution (pod) id
    return {"inputs": {"parameterValues": input_parameters(task_name, task, component),
                       "artifacts": input_artifacts(task_name, task, produced)},
            "outputs": {"artifacts": output_artifacts(task_name, component, root, salt),
                        "outputFile": output_file}}


def container_command(container: dict, ex_input: dict, task_name: str = "") -> list[str]:
    """The spec's command + args with `{{$}}` and `{{$.pipeline_task_name}}` replaced
    (compileCmdAndArgs); the image's `python` is this interpreter (the Dockerfile puts the venv's
    python first on PATH)."""
    text = json.dumps(ex_input)
    command = [sys.executable if part == "python" else part for part in container.get("command", [])]
    return command + [arg.replace("{{$}}", text).replace(TASK_PLACEHOLDER, task_name)
                      for arg in container.get("args", [])]


def merged_outputs(ex_input: dict, output_file: str) -> dict[str, list[dict]]:
    """The task's output artifacts with what its ExecutorOutput says about them (uri, metadata)."""
    outputs = {name: [dict(a) for a in entry["artifacts"]]   # none: KFP's JSON omits an empty map
               for name, entry in ex_input["outputs"].get("artifacts", {}).items()}
    if not os.path.exists(output_file):
        return outputs
    with open(output_file, encoding="utf-8") as fh:
        written = json.load(fh).get("artifacts", {})
    for name, entry in written.items():
        if name in outputs and entry.get("artifacts"):
            outputs[name][0].update({k: v for k, v in entry["artifacts"][0].items() if k != "type"})
    return outputs


def launch(command: list[str], cwd: str, log_file: str) -> int:
    """A container's process: COMMAND in CWD with this environment, stdout and stderr to LOG_FILE;
    its exit status."""
    with open(log_file, "wb") as log:
        return subprocess.run(command, cwd=cwd, env=dict(os.environ), stdout=log,
                              stderr=subprocess.STDOUT, check=False).returncode


def run_container_task(task_name: str, job: dict, produced: dict, root: str, workdir: str) -> TaskResult:
    container = _executor(job["pipelineSpec"], _component(job["pipelineSpec"], task_name))["container"]
    task_dir = os.path.join(workdir, task_name)
    os.makedirs(os.path.join(task_dir, os.path.dirname(OUTPUT_METADATA_FILE)), exist_ok=True)
    output_file = os.path.join(task_dir, OUTPUT_METADATA_FILE)
    ex_input = executor_input(task_name, job, produced, root, output_file)
    log_file = os.path.join(task_dir, "task.log")
    start = time.monotonic()
    returncode = launch(container_command(container, ex_input, task_name), task_dir, log_file)
    if returncode != 0:
        with open(log_file, encoding="utf-8", errors="replace") as fh:
            tail = "".join(fh.readlines()[-15:])
        raise KfpTaskError(f"task {task_name} exited with status {returncode} "
                           f"(log {log_file}):\n{tail}")
    return TaskResult(task_name, "container", time.monotonic() - start,
                      merged_outputs(ex_input, output_file), ex_input, log_file)


def run_driver_task(task_name: str, job: dict) -> TaskResult:
    """A task with no container: what the driver resolves for it (see the module docstring)."""
    component = _component(job["pipelineSpec"], task_name)
    executor = _executor(job["pipelineSpec"], component)
    outputs = component.get("outputDefinitions", {}).get("artifacts", {})
    if "resolver" in executor:
        return TaskResult(task_name, "resolver (emulated)", 0.0, {name: [] for name in outputs})
    if "importer" in executor:
        importer = executor["importer"]
        uri = importer["artifactUri"].get("constant") or importer["artifactUri"].get("constantValue", {}).get("stringValue")
        (name,) = outputs
        artifact = {"uri": uri, "type": importer["typeSchema"], "metadata": importer.get("metadata", {})}
        return TaskResult(task_name, "importer (emulated)", 0.0, {name: [artifact]})
    raise KfpTaskError(f"task {task_name}: executor {component['executorLabel']} is neither a "
                       f"container, an importer nor a resolver: {sorted(executor)}")


def run_pipeline_job(job: dict, workdir: str, run_id: str | None = None, progress=None) -> list[TaskResult]:
    """Every task of the job's root DAG, in order; stops at the first failed task (KfpTaskError).
    `progress(result)` is called after each task."""
    run_id = run_id or f"local-{uuid.uuid4().hex[:8]}"
    root = run_root(job, run_id)
    spec = job["pipelineSpec"]
    produced: dict[tuple[str, str], list[dict]] = {}
    results = []
    for name in task_order(spec):
        if "container" in _executor(spec, _component(spec, name)):
            result = run_container_task(name, job, produced, root, workdir)
        else:
            result = run_driver_task(name, job)
        produced.update({(name, key): artifacts for key, artifacts in result.outputs.items()})
        results.append(result)
        if progress:
            progress(result)
    return results
