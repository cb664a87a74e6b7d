"""Issue 21 config rules: which model-parallel combinations run, and named errors for the rest.
Catches a rule that lets an unsupported combination through to the Trainer (where it would fail
after minutes, or silently train unsharded), or an error that does not name the setting."""

import pytest

from components.config import ConfigError, build_config


def test_supported_combinations_validate():
    build_config("tiny", overrides=["train.shard_optimizer_state=true", "runtime.strategy=mirrored", "runtime.cpu_replicas=2"])
    build_config("tiny", overrides=["train.shard_optimizer_state=true",
                                    "runtime.strategy=multi_worker_mirrored"])
    build_config("tiny", overrides=["runtime.pipeline_stages=4", "runtime.strategy=one_device",
                                    "train.accumulation_steps=4"])
    build_config("xl", overrides=["runtime.pipeline_stages=8", "runtime.strategy=one_device"])


@pytest.mark.parametrize("overrides, message", [
    (["train.shard_optimizer_state=true", "runtime.strategy=one_device"],
     "train.shard_optimizer_state=true needs runtime.strategy=mirrored or "
     "multi_worker_mirrored.*one replica"),
    (["runtime.pipeline_stages=5", "runtime.strategy=one_device"],
     r"runtime.pipeline_stages \(5\) exceeds model.n_layer \(4\)"),
    (["runtime.pipeline_stages=0"], "runtime.pipeline_stages: must be >= 1"),
    (["runtime.pipeline_stages=2", "runtime.strategy=mirrored", "runtime.cpu_replicas=2"],
     "runtime.pipeline_stages=2 needs runtime.strategy=one_device"),
    (["runtime.pipeline_stages=2", "runtime.strategy=multi_worker_mirrored"],
     "runtime.pipeline_stages=2 needs runtime.strategy=one_device.*multi_worker_mirrored "
     r"\(data parallel\) is not supported"),
    (["runtime.pipeline_stages=2", "runtime.strategy=one_device", "train.shard_optimizer_state=true"],
     "train.shard_optimizer_state"),
])
def test_unsupported_combinations_name_the_setting(overrides, message):
    with pytest.raises(ConfigError, match=message):
        build_config("tiny", overrides=overrides)


def test_xl_preset_is_about_1_3b_parameters():
    m = build_config("xl").model
    blocks = m.n_layer * (12 * m.d_model ** 2 + 13 * m.d_model)
    config = build_config("xl")
    embeddings = (config.data.vocab_size + config.data.seq_len) * m.d_model      # tied head
    assert 1.2e9 <= blocks + embeddings <= 1.45e9
