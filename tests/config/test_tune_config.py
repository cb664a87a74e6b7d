"""tune.* and the warm-start keys: typed lists, clear errors naming the key."""

import pytest

from components.config import Config, ConfigError, build_config, from_dict, to_dict


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


def _custom_config(pipeline, node_id):
    import json
    node = next(c for c in pipeline.components if c.id == node_id)
    return json.loads(node.exec_properties["custom_config"])


def test_search_space_is_the_tuners_cache_key_not_the_trainers(tmp_path):
    """TFX caches a node on its exec properties and input artifacts: a changed space changes the
    Tuner's key (it re-runs, and the Trainer follows through its new HyperParameters input); the
    warm-start keys change the Trainer's key only. (Seen end to end: the Tuner's `why` reads
    `custom_config.tune.space.warmup_steps: [1, 3] -> [2, 4]`.)"""
    from pipeline.pipeline import create_pipeline
    tuned = ["tune.trials=3"]

    def build(*overrides):
        return create_pipeline(build_config("tiny", overrides=[*tuned, *overrides]),
                               pipeline_root=str(tmp_path / "root"), serving_dir=str(tmp_path / "s"),
                               input_fingerprint="f" * 64)
    base, space, warm = build(), build("tune.space.warmup_steps=[2, 4]"), build("train.init_from=latest_blessed")
    assert _custom_config(base, "Tuner") != _custom_config(space, "Tuner")
    assert _custom_config(base, "Trainer") == _custom_config(space, "Trainer")
    assert _custom_config(base, "Tuner") == _custom_config(warm, "Tuner")
    assert _custom_config(base, "Trainer") != _custom_config(warm, "Trainer")
    trainer = next(c for c in warm.components if c.id == "Trainer")
    assert set(trainer.inputs) >= {"hyperparameters", "base_model"}
    assert "Tuner" not in [c.id for c in create_pipeline(
        build_config("tiny"), pipeline_root=str(tmp_path / "r"), serving_dir=str(tmp_path / "s"),
        input_fingerprint="f" * 64).components]


def test_the_tuners_sections_reach_its_search(tmp_path):
    """The Tuner's custom_config holds one section_json per declared section (TUNER_READS) and
    tuner_fn reads them back with stages.read_back: the trials train the config's model and train settings
    (warm start left out), with the config's tune section."""
    import types
    from pipeline.pipeline import create_pipeline
    from components import config as config_lib
    from components.tuner import search
    from components.tuner.component import TUNER_READS
    config = build_config("tiny", overrides=["tune.trials=2", "train.learning_rate=0.002",
                                             "model.d_model=32", "train.init_from=latest_blessed"])
    pipeline = create_pipeline(config, pipeline_root=str(tmp_path / "root"),
                               serving_dir=str(tmp_path / "s"), input_fingerprint="f" * 64)
    custom = _custom_config(pipeline, "Tuner")
    assert set(custom) == set(TUNER_READS.sections) | {"code_digest"}
    assert custom["tune"] == config_lib.section_json(config.tune)
    fn_args = types.SimpleNamespace(
        custom_config=dict(custom, log_dir=str(tmp_path / "logs")), working_dir=str(tmp_path / "w"),
        train_files=[str(tmp_path / "e" / "Split-train" / "*")],
        eval_files=[str(tmp_path / "e" / "Split-eval" / "*")])
    tuner = search.tuner_fn(fn_args).tuner
    assert tuner.base_config.model == config.model
    assert tuner.base_config.train.learning_rate == 0.002
    assert tuner.base_config.train.init_from == "none"       # trials start from random weights
    assert tuner.steps_per_trial == config.tune.steps_per_trial
