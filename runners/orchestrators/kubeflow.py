"""Kubeflow Pipelines runner: the same create_pipeline(config) compiled by TFX's
KubeflowV2DagRunner into a KFP v2 pipeline spec (PipelineJob JSON). Environment only: image,
pipeline root, serving directory and Beam arguments come from the config."""

from __future__ import annotations

import json
import os

from components.config import Config

# Every container step starts here: runners/orchestrators/kfp_entrypoint.py registers the object-store
# filesystems, then hands over to TFX's kubeflow_v2_run_executor (the entrypoint KFP runs).
ENTRYPOINT_COMMAND = ["python", "-m", "runners.orchestrators.kfp_entrypoint"]
# Every step's task name, as TASK_FLAG with KFP's runtime placeholder TASK_PLACEHOLDER (resolved
# by KFP's backend since 2.4 and by Vertex AI): a step without outputs (AnomaliesGate) has no
# output URI to read it from. kfp_entrypoint takes it out of argv before TFX's entrypoint parses.
TASK_FLAG = "--bigtrain_task"
TASK_PLACEHOLDER = "{{$.pipeline_task_name}}"


def compile_kubeflow(config: Config, out_file: str) -> str:
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

    from components.storage.listing import fingerprint_input
    from pipeline.pipeline import create_pipeline

    orchestrator = config.orchestrator
    pipeline = create_pipeline(config, pipeline_root=orchestrator.pipeline_root,
                               serving_dir=orchestrator.serving_dir,
                               input_fingerprint=fingerprint_input(config.data),
                               beam_pipeline_args=list(config.runtime.beam_args))
    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
            display_name=config.paths.pipeline_name, default_image=orchestrator.image,
            default_commands=ENTRYPOINT_COMMAND, use_pipeline_spec_2_1=True),
        output_dir=os.path.dirname(os.path.abspath(out_file)),
        output_filename=os.path.basename(out_file))
    runner.run(pipeline)
    name_each_step(out_file)
    return os.path.abspath(out_file)


def name_each_step(spec_file: str) -> None:
    """Give every container step its task name (TASK_FLAG with KFP's
    `{{$.pipeline_task_name}}` placeholder): the spec TFX wrote, rewritten in place."""
    with open(spec_file, encoding="utf-8") as fh:
        job = json.load(fh)
    for executor in job["pipelineSpec"]["deploymentSpec"]["executors"].values():
        container = executor.get("container")
        if container is not None and TASK_FLAG not in container.get("args", []):
            container["args"] = [*container.get("args", []), TASK_FLAG, TASK_PLACEHOLDER]
    with open(spec_file, "w", encoding="utf-8") as fh:
        json.dump(job, fh, indent=2, sort_keys=True)
