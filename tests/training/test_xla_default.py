"""runtime.xla=auto picks the faster path per device type and run length (components/training/
loop.py use_xla has the figures): on CPU, XLA for runs of XLA_CPU_MIN_STEPS steps or more (the
default run: 0.48x the wall time), plain for short ones (compiles not paid back; and a compiled
step draws other dropout masks, so tests/e2e/test_model_parallel.py, 3-step runs comparing the
never-compiled pipeline-stage step with a one-device run, fails with XLA on: 0.13 logits apart).
Fails on the rules tried before: XLA only with a GPU (the default run is plain) and XLA always
(the short runs compile)."""

import dataclasses

import pytest
import tensorflow as tf

from components import config as config_lib
from components.training import loop


def runtime(xla: str):
    return dataclasses.replace(config_lib.build_config("tiny").runtime, xla=xla)


def test_auto_on_this_cpu_is_xla_for_long_runs_only_and_the_settings_win():
    assert not tf.config.list_physical_devices("GPU")
    short, long = loop.XLA_CPU_MIN_STEPS - 1, loop.XLA_CPU_MIN_STEPS
    assert loop.use_xla(runtime("auto"), short) is False
    assert loop.use_xla(runtime("auto"), long) is True
    assert loop.use_xla(runtime("on"), short) is True
    assert loop.use_xla(runtime("off"), long) is False


def test_the_default_run_compiles_and_the_model_parallel_runs_do_not():
    default = config_lib.build_config()                 # what `bigtrain run` trains
    assert loop.use_xla(default.runtime, default.train.train_steps) is True   # 1000 steps
    assert loop.use_xla(default.runtime, 3) is False     # tests/e2e/test_model_parallel.py's


@pytest.mark.parametrize("preset", sorted(config_lib.PRESETS))
def test_every_preset_leaves_xla_to_the_device(preset):
    assert config_lib.build_config(preset).runtime.xla == "auto"
