"""MFU in the training logs: with runtime.peak_tflops_per_device set, every log window writes an
`mfu` scalar = tokens/s x FLOPs per token / (peak x devices) (what `bigtrain ui` draws); unset,
none. Reference: the window's own tokens_per_second scalar and the model's FLOPs per token."""

import glob

import pytest
import tensorflow as tf

from components.config import ConfigError, build_config
from components.training.loop import StepLog


def _scalars(log_dir):
    out = {}
    for path in glob.glob(f"{log_dir}/train/events.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                out.setdefault(value.tag, []).append(float(tf.make_ndarray(value.tensor)))
    return out


class _State:
    loss_scale = tf.Variable(1.0)
    skipped_steps = tf.Variable(0)


@pytest.mark.parametrize("peak_tflops", [0.0, 2.0])
def test_mfu_scalar_follows_tokens_per_second(tmp_path, peak_tflops):
    config = build_config("tiny", overrides=["train.log_every=1",
                                             f"runtime.peak_tflops_per_device={peak_tflops}"])
    log = StepLog(config, lambda step: 1e-3, _State(),
                  str(tmp_path), peak_flops=peak_tflops * 1e12 * 2, flops_per_token=1_000_000)
    log.step(1, 2.5, 0.1)
    log.writer.flush()
    scalars = _scalars(tmp_path)
    if not peak_tflops:
        assert "mfu" not in scalars
        return
    (tokens_per_second,), (mfu,) = scalars["tokens_per_second"], scalars["mfu"]
    assert mfu == pytest.approx(tokens_per_second * 1e6 / 4e12, rel=1e-5)


def test_negative_peak_is_a_config_error():
    with pytest.raises(ConfigError, match="runtime.peak_tflops_per_device"):
        build_config("tiny", overrides=["runtime.peak_tflops_per_device=-1"])
