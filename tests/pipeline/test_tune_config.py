"""tune.* and the warm-start keys: typed lists, clear errors naming the key."""

import pytest

from pipeline.config import Config, ConfigError, build_config, from_dict, to_dict


def test_tune_and_warm_start_keys_parse_and_round_trip():
    config = build_config("tiny", overrides=[
        "tune.trials=3", "tune.algorithm=hyperband", "tune.space.learning_rate=[1e-4, 1e-2]",
        "tune.space.d_model=[32, 64]", "tune.space.accumulation_steps=[1, 2]",
        "train.init_from=latest_blessed", "train.freeze=[embeddings, blocks:2]"])
    assert config.tune.space.learning_rate == (1e-4, 1e-2)  # YAML reads 1e-4 as text: coerced
    assert config.tune.space.d_model == (32, 64) and config.train.freeze == ("embeddings", "blocks:2")
    assert from_dict(Config, to_dict(config)) == config


@pytest.mark.parametrize("override, message", [
    ("tune.algorithm=grid", "tune.algorithm: 'grid' is not one of"),
    ("tune.space.d_model=[30]", "tune.space.d_model: 30 is not divisible by model.n_head"),
    ("tune.space.learning_rate=[0, 1e-2]", "tune.space.learning_rate: log-uniform needs low > 0"),
    ("tune.space.learning_rate=[1e-2]", r"tune.space.learning_rate: expected \[low, high\]"),
    ("tune.space.n_layer=[two]", r"tune.space.n_layer\[0\]: expected an integer"),
    ("tune.space.accumulation_steps=[3]", "tune.space.accumulation_steps: train.global_batch_size"),
    ("tune.trials=-1", "tune.trials: must be >= 0"),
    ("train.freeze=embeddings", "train.freeze needs train.init_from"),
])
def test_bad_tune_values_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        build_config("tiny", overrides=[override])


def test_freeze_items_are_checked():
    with pytest.raises(ConfigError, match=r"train.freeze: 'blocks:9' is not `embeddings` or `blocks:N`"):
        build_config("tiny", overrides=["train.init_from=latest_blessed", "train.freeze=blocks:9"])
