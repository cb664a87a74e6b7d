"""runners/orchestrators/kfp_local.py on a hand-written PipelineJob (no TFX): the ExecutorInput each container
gets, what flows to the next task, the DAG order, the driver-only tasks, the refusals.

Catches: inputs wired to the wrong producer or missing the executor's metadata (the downstream
task asserts the exact URI and metadata), a task started before an upstream task it reads from
through an input only (no dependentTasks entry), output URIs outside the run's root, a legacy
constantValue parameter silently accepted (the KFP v2 driver rejects it), a failed task not
stopping the run."""

import json
import os

import pytest

from runners.orchestrators import kfp_local

# A container that checks its ExecutorInput and writes an ExecutorOutput, like TFX's entrypoint.
TASK_SCRIPT = r"""
import json, os, sys
ex = json.loads(sys.argv[1])
name = sys.argv[2]
record = {"inputs": ex["inputs"], "outputs": ex["outputs"], "cwd": os.getcwd()}
open(os.path.join(os.path.dirname(ex["outputs"]["outputFile"]), "..", "seen.json"), "w").write(json.dumps(record))
if name == "fail":
    sys.exit(3)
out = {"artifacts": {k: {"artifacts": [dict(v["artifacts"][0], metadata={"made_by": name})]}
                     for k, v in ex["outputs"]["artifacts"].items()}}
json.dump(out, open(ex["outputs"]["outputFile"], "w"))
"""

EXAMPLES = {"artifactType": {"instanceSchema": "title: tfx.Examples\ntype: object\n"}}
MODEL = {"artifactType": {"instanceSchema": "title: tfx.Model\ntype: object\n"}}


def container(name):
    return {"container": {"image": "x", "command": ["python", "-c", TASK_SCRIPT],
                          "args": ["{{$}}", name]}}


def job(root, gen_param=None):
    gen_param = gen_param or {"runtimeValue": {"constant": 128.0}}
    components = {
        "Gen": {"executorLabel": "Gen_exec", "outputDefinitions": {"artifacts": {"examples": EXAMPLES}},
                "inputDefinitions": {"parameters": {"seq_len": {"parameterType": "NUMBER_INTEGER"},
                                                    "conf": {"parameterType": "STRING"}}}},
        "Resolver": {"executorLabel": "Resolver_exec", "outputDefinitions": {"artifacts": {"model": MODEL}}},
        "Train": {"executorLabel": "Train_exec", "outputDefinitions": {"artifacts": {"model": MODEL}},
                  "inputDefinitions": {"artifacts": {"examples": EXAMPLES, "base": MODEL}}},
    }
    tasks = {
        # Train lists no dependentTasks: the order must come from its inputs' producers.
        "Train": {"componentRef": {"name": "Train"}, "inputs": {"artifacts": {
            "examples": {"taskOutputArtifact": {"producerTask": "Gen", "outputArtifactKey": "examples"}},
            "base": {"taskOutputArtifact": {"producerTask": "Resolver", "outputArtifactKey": "model"}}}}},
        "Gen": {"componentRef": {"name": "Gen"}, "inputs": {"parameters": {
            "seq_len": gen_param, "conf": {"runtimeValue": {"constant": {"a": 1}}}}}},
        "Resolver": {"componentRef": {"name": "Resolver"}},
    }
    executors = {"Gen_exec": container("gen"), "Train_exec": container("train"),
                 "Resolver_exec": {"resolver": {"outputArtifactQueries": {"model": {"filter": "..."}}}}}
    return {"runtimeConfig": {"gcsOutputDirectory": root},
            "pipelineSpec": {"pipelineInfo": {"name": "demo"}, "components": components,
                             "deploymentSpec": {"executors": executors},
                             "root": {"dag": {"tasks": tasks}}}}


def seen(workdir, task):
    with open(os.path.join(workdir, task, "seen.json")) as fh:
        return json.load(fh)


def test_tasks_run_in_dag_order_and_pass_artifacts_downstream(tmp_path):
    workdir = str(tmp_path / "work")
    results = kfp_local.run_pipeline_job(job("s3://bucket/root"), workdir, run_id="r7")
    assert [(r.name, r.kind) for r in results] == [
        ("Gen", "container"), ("Resolver", "resolver (emulated)"), ("Train", "container")]
    gen, train = seen(workdir, "Gen"), seen(workdir, "Train")
    assert gen["inputs"] == {"parameterValues": {"seq_len": 128.0, "conf": '{"a": 1}'}, "artifacts": {}}
    (gen_out,) = gen["outputs"]["artifacts"]["examples"]["artifacts"]
    assert gen_out["uri"].startswith("s3://bucket/root/demo/r7/Gen/") and gen_out["uri"].endswith("/examples")
    assert gen_out["type"] == EXAMPLES["artifactType"]
    assert gen["outputs"]["outputFile"] == os.path.join(workdir, "Gen", "kfp_outputs", "output_metadata.json")
    assert gen["cwd"] == os.path.join(workdir, "Gen")
    assert train["inputs"]["artifacts"] == {
        "examples": {"artifacts": [dict(gen_out, metadata={"made_by": "gen"})]},
        "base": {"artifacts": []}}  # the resolver: no blessed model without MLMD
    assert results[2].outputs["model"][0]["metadata"] == {"made_by": "train"}


def test_a_legacy_constant_value_parameter_is_refused(tmp_path):
    legacy = job("s3://bucket/root", gen_param={"runtimeValue": {"constantValue": {"intValue": "128"}}})
    with pytest.raises(kfp_local.KfpTaskError, match="task Gen parameter seq_len.*use_pipeline_spec_2_1"):
        kfp_local.run_pipeline_job(legacy, str(tmp_path))


def test_a_failed_task_stops_the_run_naming_it(tmp_path):
    failing = job("s3://bucket/root")
    failing["pipelineSpec"]["deploymentSpec"]["executors"]["Gen_exec"] = container("fail")
    with pytest.raises(kfp_local.KfpTaskError, match="task Gen exited with status 3"):
        kfp_local.run_pipeline_job(failing, str(tmp_path))
    assert not os.path.exists(tmp_path / "Train")


def test_an_importer_yields_its_uri_and_no_root_is_an_error(tmp_path):
    spec = job("s3://bucket/root")
    spec["pipelineSpec"]["deploymentSpec"]["executors"]["Resolver_exec"] = {"importer": {
        "artifactUri": {"constant": "s3://bucket/models/7"}, "typeSchema": MODEL["artifactType"]}}
    results = kfp_local.run_pipeline_job(spec, str(tmp_path), run_id="r")
    assert results[1].outputs == {"model": [{"uri": "s3://bucket/models/7",
                                             "type": MODEL["artifactType"], "metadata": {}}]}
    assert seen(str(tmp_path), "Train")["inputs"]["artifacts"]["base"]["artifacts"][0]["uri"] == "s3://bucket/models/7"
    spec["runtimeConfig"] = {}
    with pytest.raises(kfp_local.KfpTaskError, match="gcsOutputDirectory"):
        kfp_local.run_pipeline_job(spec, str(tmp_path))
