"""OpenLineage from an Airflow task and a Kubeflow step (runners/openlineage_emit.py): the task
callbacks and the container entrypoint send START and COMPLETE / FAIL to a real HTTP endpoint on
127.0.0.1, each event checked against the spec as the client carries it. TFX's own entrypoint is
replaced by a stand-in (a full Airflow or Kubeflow run is not part of this test)."""

import json
import sys
import types

import pytest

from components.storage import fs
from runners.orchestrators import kfp_entrypoint
from runners import openlineage_emit
from tests.support.openlineage_spec import Receiver, check_run_event

EXECUTOR_INPUT = {
    "inputs": {"artifacts": {"examples": {"artifacts": [{
        "uri": "s3://b/root/bigtrain/run-7/TextExampleGen/11/examples",
        "type": {"schemaTitle": "tfx.Examples"},
        "metadata": {"sequences_train": 4, "sequences_eval": 1}}]}}},
    "outputs": {"artifacts": {"model": {"artifacts": [{
        "uri": "s3://b/root/bigtrain/run-7/Trainer/12/model", "type": {"schemaTitle": "tfx.Model"},
        "metadata": {}}]}}, "outputFile": "/nonexistent/executor_output.json"},
}


@pytest.fixture
def receiver(monkeypatch):
    server = Receiver()
    monkeypatch.setenv("OPENLINEAGE_URL", server.url)
    monkeypatch.delenv("OPENLINEAGE_DISABLED", raising=False)
    yield server
    server.close()


def _fake_tfx_entrypoint(monkeypatch, outcome, seen_argv=None):
    module = types.ModuleType("kubeflow_v2_run_executor")

    def main(argv):
        if seen_argv is not None:
            seen_argv.extend(argv)
        if outcome:
            raise outcome
    def parse_flags(argv):
        from absl import flags
        flags.FLAGS(argv[:1])   # absl's app.run wants FLAGS parsed
        return argv
    module.main, module._parse_flags = main, parse_flags
    monkeypatch.setitem(sys.modules, "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
                        module)
    monkeypatch.setattr(fs, "exit_process", lambda code: None)


@pytest.mark.parametrize("outcome, end", [(None, "COMPLETE"), (RuntimeError("no space"), "FAIL")])
def test_a_kubeflow_step_sends_start_and_its_end(receiver, monkeypatch, outcome, end):
    _fake_tfx_entrypoint(monkeypatch, outcome)
    argv = ["kfp_entrypoint", "--executor_class_path", "x.Y",
            "--json_serialized_invocation_args", json.dumps(EXECUTOR_INPUT)]
    with pytest.raises((SystemExit, RuntimeError)):
        kfp_entrypoint.main(argv)
    events = [body for _, body in receiver.events]
    assert [e["eventType"] for e in events] == ["START", end]
    for event in events:
        check_run_event(event)
        assert event["job"]["name"] == "bigtrain.Trainer"
        assert event["inputs"][0]["namespace"] == "s3://b"
        assert event["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 5
        assert event["outputs"][0]["name"] == "root/bigtrain/run-7/Trainer/12/model"
    parent = events[0]["run"]["facets"]["parent"]
    assert parent["job"]["name"] == "bigtrain"
    from pipeline.lineage import openlineage_events as ol
    assert parent["run"]["runId"] == ol.run_uuid(ol.RunRecord("run-7", "bigtrain"))
    if outcome:
        assert events[1]["run"]["facets"]["errorMessage"]["message"] == "RuntimeError: no space"


def test_a_kubeflow_step_without_outputs_is_named_by_its_task_flag(receiver, monkeypatch):
    """AnomaliesGate has inputs only: its pipeline and run come from its input's URI, its name
    from the spec's --bigtrain_task (KFP's {{$.pipeline_task_name}}), which TFX's entrypoint
    never sees. Caught on the old code: its events went out as job bigtrain.unknown of run
    'unknown' (seen in tests/e2e/test_kfp_contract.py)."""
    seen = []
    _fake_tfx_entrypoint(monkeypatch, None, seen)
    gate_input = {"inputs": EXECUTOR_INPUT["inputs"], "outputs": {"outputFile": "/nonexistent/o.json"}}
    argv = ["kfp_entrypoint", "--executor_class_path", "x.Gate", "--json_serialized_invocation_args",
            json.dumps(gate_input), "--bigtrain_task", "AnomaliesGate"]
    with pytest.raises(SystemExit):
        kfp_entrypoint.main(argv)
    events = [body for _, body in receiver.events]
    assert [(e["eventType"], e["job"]["name"]) for e in events] == [
        ("START", "bigtrain.AnomaliesGate"), ("COMPLETE", "bigtrain.AnomaliesGate")]
    from pipeline.lineage import openlineage_events as ol
    parent = events[0]["run"]["facets"]["parent"]["run"]["runId"]
    assert parent == ol.run_uuid(ol.RunRecord("run-7", "bigtrain"))
    assert "--bigtrain_task" not in seen and "AnomaliesGate" not in seen
    assert seen[-2:] == ["--json_serialized_invocation_args", json.dumps(gate_input)]


def test_an_unresolved_task_placeholder_is_no_name():
    """A KFP backend before 2.4 passes the placeholder as it is: no task name, not a job called
    '{{$.pipeline_task_name}}'."""
    argv = ["e", "--x", "1", "--bigtrain_task", "{{$.pipeline_task_name}}"]
    assert kfp_entrypoint.split_task(argv) == (["e", "--x", "1"], None)
    assert kfp_entrypoint.split_task(["e", "--bigtrain_task=Pusher"]) == (["e"], "Pusher")


def test_an_airflow_task_sends_start_and_its_end(receiver, tmp_path):
    callbacks = openlineage_emit.airflow_callbacks("bigtrain", str(tmp_path / "metadata.sqlite"))
    context = {"dag_run": types.SimpleNamespace(run_id="scheduled__2026"),
               "task": types.SimpleNamespace(task_id="Trainer")}
    callbacks["on_execute_callback"](context)
    callbacks["on_failure_callback"](dict(context, exception=ValueError("bad shard")))
    events = [body for _, body in receiver.events]
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    for event in events:
        check_run_event(event)
        assert event["job"]["name"] == "bigtrain.Trainer"
    assert events[1]["run"]["facets"]["errorMessage"]["message"] == "ValueError: bad shard"
    assert events[0]["run"]["runId"] == events[1]["run"]["runId"]


def test_the_dag_gives_every_task_the_callbacks(monkeypatch):
    """build_dag puts the callbacks in the DAG's default_args (TFX's runner replaced)."""
    import tfx.orchestration.airflow.airflow_dag_runner as runner_module
    from components import config as config_lib
    from runners.orchestrators import airflow
    seen = {}

    class Runner:
        def __init__(self, config):
            seen.update(config.airflow_dag_config)

        def run(self, pipeline):
            return pipeline
    monkeypatch.setattr(runner_module, "AirflowDagRunner", Runner)
    monkeypatch.setattr("pipeline.pipeline.create_pipeline", lambda config, **kw: None)
    monkeypatch.setattr("components.storage.listing.fingerprint_input", lambda data: "f")
    config = config_lib.build_config("tiny")
    airflow.build_dag(config)
    assert {"on_execute_callback", "on_success_callback",
            "on_failure_callback"} <= set(seen["default_args"])
