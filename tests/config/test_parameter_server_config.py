"""Issue 61's refusals: what runtime.strategy=parameter_server cannot keep consistent fails at
config time with the setting and the reason (components/config/strategy_rules.py), not minutes
later inside a cluster. Reference: the settings each refusal names, written out by hand."""

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
])
def test_refusals_name_the_setting_and_the_reason(overrides, message):
    with pytest.raises(ConfigError, match="runtime.strategy=parameter_server cannot be combined "
                                          "with " + message):
        build_config("tiny", overrides=["runtime.strategy=parameter_server", *overrides])


def test_bigtrain_run_refuses_it_before_any_stage(tmp_path):
    """`bigtrain run`'s plan (runners/local.py _plan_places, before the lock, the store or any
    stage) and the Trainer (run_fn) refuse it: the pipeline's Trainer trains in one process."""
    from runners.local import _plan_places
    config = build_config("tiny", overrides=["runtime.strategy=parameter_server",
                                             f"paths.home={tmp_path}"])
    with pytest.raises(ConfigError, match="not built into the pipeline's Trainer yet.*ps-task"):
        _plan_places(config)
