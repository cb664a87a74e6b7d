"""runtime.xla=auto picks the faster path per device type, as measured (components/training/
loop.py AUTO_XLA has the figures): XLA on CPU since 2026-12-07 (the default run on the AMD EPYC
VM, quiet, alternated: 0.95x and 0.81x the training loop's wall, 0.79-0.90x its CPU-s;
docs/benchmarks.md "CPU defaults"), XLA with GPUs. Fails if auto goes back to the plain step on
CPU. The tests not about XLA pin runtime.xla=off (tests/training/conftest.py TINY_OVERRIDES,
tests/e2e/conftest.py PLAIN_STEP): a short run would pay the compile."""

import dataclasses

import pytest
import tensorflow as tf

from components import config as config_lib
from components.training import loop


def runtime(xla: str):
    return dataclasses.replace(config_lib.build_config("tiny").runtime, xla=xla)


def test_auto_compiles_on_this_cpu_and_the_settings_win():
    assert not tf.config.list_physical_devices("GPU")
    assert loop.use_xla(runtime("auto")) is True
    assert loop.use_xla(runtime("on")) is True
    assert loop.use_xla(runtime("off")) is False


def test_auto_reads_the_device_type(monkeypatch):
    """auto = the table's entry for the device the step runs on: a table that sent CPU and GPU
    the other way round is followed (hand-set values, not the product's)."""
    monkeypatch.setattr(loop, "AUTO_XLA", {"CPU": False, "GPU": True})
    assert loop.use_xla(runtime("auto")) is False
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["/physical_device:GPU:0"] if kind == "GPU" else [])
    assert loop.use_xla(runtime("auto")) is True
    monkeypatch.setattr(loop, "AUTO_XLA", {"CPU": True, "GPU": False})
    assert loop.use_xla(runtime("auto")) is False


@pytest.mark.parametrize("preset", sorted(config_lib.PRESETS))
def test_every_preset_leaves_xla_to_the_device(preset):
    assert config_lib.build_config(preset).runtime.xla == "auto"


class _StepMade(Exception):
    pass


@pytest.mark.parametrize("xla, compiled", [("auto", True), ("off", False), ("on", True)])
def test_train_hands_the_choice_to_the_step(xla, compiled, monkeypatch, tmp_path):
    """loop.train builds its step with use_xla's answer: the default run (auto) compiles on this
    CPU. Stopped where the step is made (nothing compiled or trained: the tiny test model)."""
    from tests.training.conftest import tiny_config
    made = {}

    def make_train_step(*args, **kwargs):
        made.update(kwargs)
        raise _StepMade
    monkeypatch.setattr(loop, "make_train_step", make_train_step)
    with pytest.raises(_StepMade):
        loop.train(tiny_config(f"runtime.xla={xla}"), [], str(tmp_path / "run"),
                   str(tmp_path / "ckpt"), strategy=tf.distribute.get_strategy())
    assert made["xla"] is compiled
