"""runtime.xla=auto picks the faster path per device type, as measured (docs/benchmarks.md,
"Attention cost": the whole default run trains in 0.76x the CPU time with XLA). The old rule,
XLA only with a GPU, fails the CPU case."""

import dataclasses

import pytest
import tensorflow as tf

from components import config as config_lib
from components.training import loop


def runtime(xla: str):
    return dataclasses.replace(config_lib.build_config("tiny").runtime, xla=xla)


def test_auto_is_on_for_this_cpu_and_the_settings_win():
    assert not tf.config.list_physical_devices("GPU")
    assert loop.AUTO_XLA == {"CPU": True, "GPU": True}
    assert loop.use_xla(runtime("auto")) is True
    assert loop.use_xla(runtime("on")) is True
    assert loop.use_xla(runtime("off")) is False


@pytest.mark.parametrize("preset", sorted(config_lib.PRESETS))
def test_every_preset_leaves_xla_to_the_device(preset):
    assert config_lib.build_config(preset).runtime.xla == "auto"
