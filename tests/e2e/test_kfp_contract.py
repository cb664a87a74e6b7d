"""The Kubeflow path executed (issue 18, item 7): `bigtrain compile kubeflow` with the pipeline
root, the corpus and the serving folder on the S3 server of `make objectstore`, then every task of
the compiled KFP v2 PipelineJob run by runners/orchestrators/kfp_local.py: in the DAG's order, one process per
task, through the spec's own container command (runners.orchestrators.kfp_entrypoint, which hands over to
tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor), with the ExecutorInput built
the way the KFP v2 driver and launcher build it. No MLMD: the stages share only the bucket and the
artifacts one task's ExecutorOutput hands the next.

Each task's process is a fork of one server that imported what every task's command imports
before its executor (TASK_IMPORTS: the entrypoint, TFX's container entrypoint, TensorFlow with
them; tests/support/fork_server.py), not a fresh interpreter: a fork still starts with nothing in
memory from another task, its own folder and environment, and the spec's own `python -m`
command and arguments; only the ~10 CPU-s of those imports per task are shared. Each executor's
own modules (the Trainer's, TFDV for StatisticsGen) are imported in its fork, as in its container.

Not run as on a cluster, and why: the two latest_blessed_model_resolver tasks are KFP *driver*
tasks with no container (they query MLMD); they are emulated as a first run on a fresh store
(no blessed model: the Evaluator gets an empty baseline). The open-source KFP backend refuses
them at submission ("resolver not implemented yet"); Vertex AI Pipelines runs them.

Catches: a spec KFP's driver cannot resolve (legacy constantValue parameters), an executor that
cannot read its ExecutorInput (types, metadata, integer parameters), a step that cannot reach
s3:// without the local runner's set-up (tensorflow-io not registered) or that exits non-zero
after its work (tensorflow-io's exit abort), a stage writing to a local folder instead of its
artifact URI, a push that is not a loadable version in the bucket."""

import json
import os
import sys

import numpy as np
import pytest

from components.storage import fs
from runners.cli import app as cli
from runners.orchestrators import kfp_local
from tests.support.corpora import _tiny_corpus, s3_args
from tests.support.fork_server import ForkServer
from tests.support.objectstore import use_objectstore
from tests.support.openlineage_spec import Receiver, check_run_event, dataset_uris, stage_events

pytestmark = pytest.mark.slow

CONTAINER_TASKS = ["CuratedSchemaGen", "TextExampleGen", "StatisticsGen", "ExampleValidator",
                   "AnomaliesGate", "Trainer", "LanguageModelEvaluator", "Pusher"]


# What runners.orchestrators.kfp_entrypoint imports in every task before it hands over to TFX's entrypoint
# (its module and main()); nothing here starts TensorFlow's runtime.
TASK_IMPORTS = ["runners.orchestrators.kfp_entrypoint", "absl.app", "runners.beam.staging",
                "runners.openlineage_emit", "runners.orchestrators.kfp_local",
                "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
# A guard against a hung task, not a speed check (a task needs ~5-40 CPU-s).
TASK_TIMEOUT_S = 1800


def launch_in_fork(server: ForkServer):
    """kfp_local.launch for the forks of `server`: the container's command must be the spec's
    `python -m MODULE ARGS`; the task's stdout and then its stderr go to its log."""
    def launch(command: list[str], cwd: str, log_file: str) -> int:
        assert command[:2] == [sys.executable, "-m"], command[:3]
        started = server.start_module(command[2], command[3:], env=dict(os.environ), cwd=cwd)
        code, out, err = server.wait(started)
        with open(log_file, "w", encoding="utf-8") as log:
            log.write(out + err)
        return code
    return launch


@pytest.fixture(scope="module")
def kfp_run(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    prefix = use_objectstore(monkeypatch)
    work = tmp_path_factory.mktemp("kfp")
    receiver = Receiver()   # every step's OpenLineage events (the steps inherit this environment)
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    monkeypatch.delenv("OPENLINEAGE_DISABLED", raising=False)
    monkeypatch.delenv("OPENLINEAGE_CONFIG", raising=False)
    try:
        _tiny_corpus(f"{prefix}/corpus")
        out = work / "pipeline.json"
        # No int8/TFLite variants: the executor contract is the point (variants: tests/e2e, export).
        assert cli.main(["compile", "kubeflow", "--out", str(out), *s3_args(prefix),
                         "--set", "export.quantize=[]"]) == 0
        job = kfp_local.load_pipeline_job(str(out))
        with ForkServer(dict(os.environ), TASK_IMPORTS, hang_guard_s=TASK_TIMEOUT_S) as server:
            monkeypatch.setattr(kfp_local, "launch", launch_in_fork(server))
            results = kfp_local.run_pipeline_job(job, str(work / "tasks"), run_id="contract")
        receiver.close()
        yield (prefix, job, {r.name: r for r in results}, [r.name for r in results],
               [body for _, body in receiver.events])
    finally:
        receiver.close()
        fs.rmtree(prefix)
        monkeypatch.undo()


def test_every_task_runs_in_dag_order(kfp_run):
    _, job, results, order, _ = kfp_run
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    assert set(order) == set(tasks)
    for name, task in tasks.items():
        for upstream in task.get("dependentTasks", []):
            assert order.index(upstream) < order.index(name), (upstream, name, order)
    assert [n for n in order if results[n].kind == "container"] == [
        n for n in order if n in CONTAINER_TASKS] and len(CONTAINER_TASKS) == 8
    resolvers = [n for n in order if n.startswith("latest_blessed_model_resolver")]
    assert len(resolvers) == 2 and all(results[n].kind == "resolver (emulated)" for n in resolvers)
    baseline = results["LanguageModelEvaluator"].executor_input["inputs"]["artifacts"]["baseline_model"]
    assert baseline == {"artifacts": []}


def test_outputs_live_under_the_run_root_in_the_bucket(kfp_run):
    prefix, _, results, _, _ = kfp_run
    run_root = f"{prefix}/root/bigtrain/contract"
    examples = results["TextExampleGen"].outputs["examples"][0]
    assert examples["uri"].startswith(f"{run_root}/TextExampleGen/")
    assert json.loads(examples["metadata"]["split_names"]) == ["train", "eval"]
    assert any(f.endswith(".gz") for f in fs.walk_files(examples["uri"] + "/Split-train"))
    trainer = results["Trainer"].executor_input
    assert trainer["inputs"]["artifacts"]["examples"]["artifacts"][0]["uri"] == examples["uri"]
    model = results["Trainer"].outputs["model"][0]["uri"]
    assert "saved_model.pb" in list(fs.walk_files(f"{model}/Format-Serving"))


def test_a_model_is_pushed_to_the_bucket_and_loads(kfp_run):
    """TF Serving's loader (tf.compat.v1 Session + loader.load) reads the version from s3://."""
    from tests.export.conftest import SessionModel
    prefix, _, results, _, _ = kfp_run
    pushed = results["Pusher"].outputs["pushed_model"][0]
    assert pushed["metadata"]["pushed"] == 1, pushed
    destination = pushed["metadata"]["pushed_destination"]
    assert destination.startswith(f"{prefix}/serving/gpt/"), destination
    assert "saved_model.pb" in list(fs.walk_files(destination))
    out = SessionModel(destination).run("generate", prompt=np.array([b"def ", b""], object),
                                        max_new_tokens=np.array([3, 0], np.int32))
    assert len(next(iter(out.values()))) == 2
    for task in CONTAINER_TASKS:  # nothing written next to the task (a container's local disk)
        task_dir = os.path.dirname(results[task].log_file)
        assert sorted(os.listdir(task_dir)) in (["kfp_outputs", "task.log"],), (task, os.listdir(task_dir))


def test_every_step_sends_start_and_complete_naming_its_artifacts(kfp_run):
    """The Kubeflow path of issue 42, item 3: each container step (runners/orchestrators/kfp_entrypoint.py, its
    own process) sent START then COMPLETE to an HTTP endpoint here, valid against the spec as the
    client carries it, the stages' parent the KFP run; the COMPLETE event's datasets are the
    step's ExecutorInput inputs and ExecutorOutput outputs, s3:// URI for URI."""
    _, _, results, _, events = kfp_run
    for event in events:
        check_run_event(event)
    by_stage = stage_events(events, "contract")
    assert {stage: [e["eventType"] for e in got] for stage, got in by_stage.items()} == {
        task: ["START", "COMPLETE"] for task in CONTAINER_TASKS}, by_stage
    for task in CONTAINER_TASKS:
        complete = by_stage[task][-1]
        inputs = results[task].executor_input["inputs"].get("artifacts", {})
        assert dataset_uris(complete, "inputs") == {
            a["uri"] for entry in inputs.values() for a in entry["artifacts"]}, task
        assert dataset_uris(complete, "outputs") == {
            a["uri"] for artifacts in results[task].outputs.values() for a in artifacts}, task
        assert all(uri.startswith("s3://") for uri in dataset_uris(complete, "outputs")), task
