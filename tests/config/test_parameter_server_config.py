"""Issue 61's refusals: what runtime.strategy=parameter_server cannot keep consistent fails at
config time with the setting and the reason (components/config/strategy_rules.py), not minutes
later inside a cluster. Reference: the settings each refusal names, written out by hand."""

import json

import pytest

from components.config import ConfigError, build_config


def test_a_plain_parameter_server_config_validates():
    build_config("tiny", overrides=["runtime.strategy=parameter_server"])
    build_config("tiny", overrides=["runtime.strategy=parameter_server",
                                    "runtime.precision=mixed_bfloat16"])


@pytest.mark.parametrize("overrides, message", [
    (["train.shard_optimizer_state=true"], r"train.shard_optimizer_state=true \(ZeRO-1\): "
     "ZeRO-1 splits"),
    (["runtime.pipeline_stages=2"], "runtime.pipeline_stages=2: pipeline stages"),
    (["runtime.precision=mixed_float16"], "runtime.precision=mixed_float16: its dynamic loss "
     "scale .* race"),
    (["train.spike_rollback=true"], "train.spike_rollback=true: a rollback restores"),
    (["train.keep_best=true"], "train.keep_best=true: the chief does not validate"),
    (["train.init_from=latest_blessed"], "train.init_from=latest_blessed: the chief builds its "
     "model fresh"),
])
def test_refusals_name_the_setting_and_the_reason(overrides, message):
    with pytest.raises(ConfigError, match="runtime.strategy=parameter_server cannot be combined "
                                          "with " + message):
        build_config("tiny", overrides=["runtime.strategy=parameter_server", *overrides])


CLUSTER = {"ps": ["localhost:1"], "worker": ["localhost:2"], "chief": ["localhost:3"]}


def _plan(tmp_path, *overrides):
    from runners.local.run import _plan_places
    return _plan_places(build_config("tiny", overrides=[
        "runtime.strategy=parameter_server", f"paths.home={tmp_path}", *overrides]))


@pytest.mark.parametrize("tf_config, message", [
    (None, "`bigtrain run` is the chief of a TF_CONFIG cluster; set TF_CONFIG .*ps-task"),
    ("{not json", "TF_CONFIG is not a JSON object"),
    ({"cluster": {"worker": ["localhost:2"], "chief": ["localhost:3"]},
      "task": {"type": "chief", "index": 0}}, "TF_CONFIG's cluster has no ps task"),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}},
     "trains as the chief; TF_CONFIG's task is .*worker.*ps-task"),
])
def test_bigtrain_run_refuses_it_without_a_cluster_to_coordinate(tmp_path, monkeypatch,
                                                                 tf_config, message):
    """`bigtrain run`'s plan (runners/local/run.py _plan_places, before the lock, the store or any
    stage) names TF_CONFIG when this process cannot be the chief of a ps cluster."""
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config if isinstance(tf_config, str)
                           else json.dumps(tf_config))
    with pytest.raises(ConfigError, match=message):
        _plan(tmp_path)


def test_bigtrain_run_as_the_chief_plans_and_refuses_the_tuner(tmp_path, monkeypatch):
    """As the chief of a cluster with ps and worker tasks the plan passes; with the Tuner it
    names tune.trials (its trials train without a cluster)."""
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER,
                                                "task": {"type": "chief", "index": 0}}))
    _plan(tmp_path)
    with pytest.raises(ConfigError, match="cannot be combined with tune.trials=2: the Tuner's"):
        _plan(tmp_path, "tune.trials=2")
