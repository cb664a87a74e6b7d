"""`bigtrain compile kubeflow`: the spec is parsed by kfp's own PipelineSpec proto and holds every
stage, its upstream dependencies, its parameters, the image, the pipeline root and Beam args."""

import json

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from runners.cli import app as cli
from components import config as config_lib

pytestmark = pytest.mark.slow

EXPECTED_UPSTREAM = {
    "CuratedSchemaGen": set(), "TextExampleGen": set(),
    "StatisticsGen": {"TextExampleGen"},
    "ExampleValidator": {"StatisticsGen", "CuratedSchemaGen"},
    "AnomaliesGate": {"ExampleValidator"},
    "Trainer": {"TextExampleGen", "CuratedSchemaGen", "AnomaliesGate"},
    "LanguageModelEvaluator": {"TextExampleGen", "Trainer", "latest_blessed_model_resolver-model-resolver"},
    "Pusher": {"Trainer", "LanguageModelEvaluator"},
}
OVERRIDES = ["orchestrator.image=registry.example.com/bigtrain:1.2", "train.learning_rate=5e-4",
             "orchestrator.pipeline_root=gs://bucket/bigtrain", "data.seq_len=256"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("kfp") / "pipeline.json"
    args = ["compile", "kubeflow", "--out", str(out), "--set", f"data.input={corpus[0]}",
            "--beam-arg=--direct_num_workers=2", "--beam-arg=--direct_running_mode=multi_processing"]
    for override in OVERRIDES:
        args += ["--set", override]
    assert cli.main(args) == 0
    job = json.loads(out.read_text())
    spec = json_format.ParseDict(job["pipelineSpec"], pipeline_spec_pb2.PipelineSpec())
    config = config_lib.build_config("tiny", overrides=[f"data.input={corpus[0]}", *OVERRIDES])
    return job, spec, config


def test_every_stage_with_its_upstream_dependencies(compiled):
    _, spec, _ = compiled
    tasks = spec.root.dag.tasks
    for stage, upstream in EXPECTED_UPSTREAM.items():
        assert stage in tasks, sorted(tasks)
        assert set(tasks[stage].dependent_tasks) == upstream, stage
    assert any(name.startswith("latest_blessed_model_resolver") for name in tasks)


def test_parameters_carry_the_config(compiled):
    _, spec, config = compiled

    def parameter(task, name):
        # Pipeline spec 2.1: runtimeValue.constant (a protobuf Value), the only constant the
        # open-source KFP v2 driver resolves (the 2.0 constantValue is refused there).
        value = spec.root.dag.tasks[task].inputs.parameters[name].runtime_value.constant
        return getattr(value, value.WhichOneof("kind"))

    assert json.loads(parameter("TextExampleGen", "data_config")) == config_lib.to_dict(config.data)
    assert json.loads(parameter("CuratedSchemaGen", "data_config"))["seq_len"] == 256
    assert spec.schema_version == "2.1.0"
    custom = json.loads(parameter("Trainer", "custom_config"))
    assert json.loads(custom["train"])["learning_rate"] == 5e-4
    assert json.loads(parameter("LanguageModelEvaluator", "eval_config")) == config_lib.to_dict(config.eval)
    assert "/mnt/bigtrain/serving/gpt" in parameter("Pusher", "push_destination")


def test_image_pipeline_root_and_beam_args(compiled):
    job, spec, _ = compiled
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://bucket/bigtrain"
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    containers = {name: e["container"] for name, e in executors.items() if "container" in e}
    assert {c["image"] for c in containers.values()} == {"registry.example.com/bigtrain:1.2"}
    example_gen = containers["TextExampleGen_executor"]["args"]
    assert "--direct_running_mode=multi_processing" in example_gen and "--direct_num_workers=2" in example_gen
    assert "components.training.run_fn.TrainerExecutor" in containers["Trainer_executor"]["args"]
    assert {tuple(c["command"]) for c in containers.values()} == {("python", "-m", "runners.orchestrators.kfp_entrypoint")}
    # Every step learns its task name from KFP (a step without outputs has no URI to read it from).
    assert {tuple(c["args"][-2:]) for c in containers.values()} == {
        ("--bigtrain_task", "{{$.pipeline_task_name}}")}
