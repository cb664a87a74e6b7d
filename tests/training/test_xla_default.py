"""runtime.xla=auto: on with GPUs, off on CPU (components/training/loop.py AUTO_XLA says why: a
compiled step draws other dropout masks, so the pipeline-stage step, never compiled, would stop
equalling its one-device reference). tests/e2e/test_model_parallel.py is what fails with CPU on
(logits 0.13 apart); this pins the rule and that the settings win over it."""

import dataclasses

import pytest
import tensorflow as tf

from components import config as config_lib
from components.training import loop


def runtime(xla: str):
    return dataclasses.replace(config_lib.build_config("tiny").runtime, xla=xla)


def test_auto_is_off_for_this_cpu_and_the_settings_win():
    assert not tf.config.list_physical_devices("GPU")
    assert loop.AUTO_XLA == {"CPU": False, "GPU": True}
    assert loop.use_xla(runtime("auto")) is False
    assert loop.use_xla(runtime("on")) is True
    assert loop.use_xla(runtime("off")) is False


@pytest.mark.parametrize("preset", sorted(config_lib.PRESETS))
def test_every_preset_leaves_xla_to_the_device(preset):
    assert config_lib.build_config(preset).runtime.xla == "auto"
