import pytest
import yaml

from components import config as config_lib
from components.config import ConfigError, build_config


def test_presets_build_and_validate():
    for name in config_lib.PRESETS:
        config = build_config(name)
        assert config.preset == name


def test_default_and_presets_use_the_modern_block_and_gpt2_stays_selectable():
    assert config_lib.ModelConfig().arch == "llama"
    for name in config_lib.PRESETS:
        model = build_config(name).model
        assert model.arch == "llama" and model.n_head % (model.n_kv_head or model.n_head) == 0
    old = build_config("tiny", overrides=["model.arch=gpt2", "train.lr_schedule=cosine",
                                          "train.global_batch_size=32", "train.train_steps=500"])
    assert old.model.arch == "gpt2" and old.train.lr_schedule == "cosine"
    recipe = build_config("tiny").train   # the measured recipe (docs/benchmarks.md, "Recipe")
    assert (recipe.global_batch_size, recipe.train_steps, recipe.lr_schedule) == (16, 1000, "wsd")


def test_override_types_are_coerced_and_checked():
    config = build_config("tiny", overrides=["train.learning_rate=3e-4", "model.n_layer=2",
                                             "model.tie_embeddings=false",
                                             "runtime.beam_args=[--a=1, --b=2]"])
    assert config.train.learning_rate == pytest.approx(3e-4)
    assert config.model.n_layer == 2 and config.model.tie_embeddings is False
    assert config.runtime.beam_args == ("--a=1", "--b=2")
    with pytest.raises(ConfigError, match=r"model\.n_layer: expected an integer"):
        build_config("tiny", overrides=["model.n_layer=two"])
    with pytest.raises(ConfigError, match=r"model\.tie_embeddings: expected true or false"):
        build_config("tiny", overrides=["model.tie_embeddings=3"])


def test_unknown_keys_name_the_key():
    with pytest.raises(ConfigError, match=r"unknown config key 'train\.learnin_rate'.*learning_rate"):
        build_config("tiny", overrides=["train.learnin_rate=1"])
    with pytest.raises(ConfigError, match=r"unknown config key 'nosuch'"):
        build_config("tiny", overrides=["nosuch.x=1"])
    with pytest.raises(ConfigError, match="not of the form"):
        build_config("tiny", overrides=["train.learning_rate"])
    with pytest.raises(ConfigError, match="unknown preset"):
        build_config("huge")


def test_yaml_file_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"train": {"train_steps": 77, "learning_rate": "1e-3"},
                                    "data": {"seq_len": 64}}))
    config = build_config("tiny", str(path), ["train.train_steps=88"])
    assert (config.train.train_steps, config.train.learning_rate, config.data.seq_len) == (88, 1e-3, 64)
    path.write_text(yaml.safe_dump({"train": {"bogus": 1}}))
    with pytest.raises(ConfigError, match=r"train\.bogus"):
        build_config("tiny", str(path))
    path.write_text(yaml.safe_dump({"model": 5}))
    with pytest.raises(ConfigError, match=r"model: expected a mapping"):
        build_config("tiny", str(path))


@pytest.mark.parametrize("overrides, message", [
    (["train.global_batch_size=30", "train.accumulation_steps=4", "runtime.cpu_replicas=2"],
     r"global_batch_size \(30\) must be divisible by replicas \(2\) x train\.accumulation_steps \(4\)"),
    (["model.d_model=66"], r"model\.d_model \(66\) must be divisible by model\.n_head \(4\)"),
    (["data.eval_fraction=1.5"], r"data\.eval_fraction"),
    (["runtime.precision=fp8"], r"runtime\.precision: 'fp8'"),
    (["runtime.strategy=tpu"], r"runtime\.strategy"),
    (["train.warmup_steps=1000"], r"train\.warmup_steps"),
    (["data.seq_len=0"], r"data\.seq_len: must be > 0"),
    (["train.min_learning_rate=1.0"], r"min_learning_rate"),
    (["model.arch=gpt3"], r"model\.arch: 'gpt3' is not one of \('gpt2', 'llama'\)"),
    (["model.n_kv_head=3"], r"model\.n_kv_head \(3\) must divide model\.n_head \(4\)"),
    (["model.arch=gpt2", "model.n_kv_head=2"], r"model\.n_kv_head=2 needs model\.arch=llama"),
    (["model.arch=gpt2", "model.qk_norm=true"], r"model\.qk_norm=true needs model\.arch=llama"),
    (["model.n_head=4", "model.d_model=36"], r"head width .* = 9 must be even"),
    (["train.lr_schedule=linear"], r"train\.lr_schedule: 'linear'"),
    (["train.decay_fraction=0"], r"train\.decay_fraction: must be in \(0, 1\]"),
    (["tune.space.d_model=[36]"], r"tune\.space\.d_model: 36 .* into even head widths"),
    (["train.init_from='hf: '"], r"train\.init_from=hf:DIR: no directory after hf:"),
    (["push.formats=[gguf]"], r"push\.formats: 'gguf' is not one of \('hf',\)"),
])
def test_cross_field_checks_fail_early(overrides, message):
    with pytest.raises(ConfigError, match=message):
        build_config("tiny", overrides=overrides)


def test_replica_count_enters_the_batch_check():
    build_config("tiny", overrides=["train.global_batch_size=24", "train.accumulation_steps=4",
                                    "runtime.strategy=one_device"])
    with pytest.raises(ConfigError, match=r"replicas \(8\)"):
        build_config("tiny", overrides=["train.global_batch_size=20"], num_replicas=8)


def test_round_trip_and_saved_file(tmp_path):
    config = build_config("small", overrides=["train.learning_rate=5e-4"])
    as_dict = config_lib.to_dict(config)
    assert config_lib.from_dict(config_lib.Config, as_dict) == config
    path = config_lib.save_config(config, str(tmp_path / "run"))
    loaded = yaml.safe_load(open(path))
    assert config_lib.from_dict(config_lib.Config, loaded) == config
    # A section's JSON (a stage's cache key) ignores changes to other sections.
    other = build_config("small", overrides=["train.learning_rate=1e-4"])
    assert config_lib.section_json(other.data) == config_lib.section_json(config.data)
    assert config_lib.digest(other) != config_lib.digest(config)


def test_export_section_defaults_and_checks():
    config = build_config("tiny")
    assert config.export.quantize == () and config.export.serve == "float"
    assert build_config("cpu").export.quantize == ("int8", "tflite")
    assert build_config("tiny", overrides=["export.quantize=[int8,tflite]"]).export.quantize == \
        ("int8", "tflite")
    assert build_config("tiny", overrides=["export.quantize=[int8]", "export.serve=int8"]
                        ).export.serve == "int8"
    with pytest.raises(ConfigError, match=r"'int8' is not exported; add it to export.quantize"):
        build_config("tiny", overrides=["export.serve=int8"])
    assert build_config("tiny", overrides=["export.quantize=[]"]).export.quantize == ()
    # The rotary bound, exactly at it (seq_len 128 + 65408 = 2^16) and for gpt2 (no bound).
    assert build_config("tiny", overrides=["export.max_new_tokens=65408"]).export.max_new_tokens == 65408
    assert build_config("tiny", overrides=["model.arch=gpt2", "model.n_kv_head=0",
                                           "export.max_new_tokens=1000000"])
    for overrides, message in [
        (["export.quantize=[int4]"], r"export\.quantize: 'int4' is not one of"),
        (["export.quantize=[int8, int8]"], "lists a variant twice"),
        (["export.serve=tflite"], r"export\.serve: 'tflite' is not one of .*TF Serving needs a SavedModel"),
        (["export.serve=int8", "export.quantize=[tflite]"], r"export\.serve: 'int8' is not exported"),
        (["export.max_new_tokens=0"], r"export\.max_new_tokens: must be > 0"),
        (["export.max_new_tokens=65409"], r"export\.max_new_tokens: 65409 plus data\.seq_len \(128\) "
                                          r"must be at most 65536 for a rotary \(llama\) model"),
        (["eval.max_quantization_loss_delta=-1"], r"eval\.max_quantization_loss_delta: must be >= 0"),
    ]:
        with pytest.raises(ConfigError, match=message):
            build_config("tiny", overrides=overrides)


@pytest.mark.parametrize("override, key", [
    ("train.learning_rate=nan", "train.learning_rate"),
    ("train.learning_rate=.nan", "train.learning_rate"),
    ("train.learning_rate=inf", "train.learning_rate"),
    ("train.learning_rate=-.inf", "train.learning_rate"),
    ("train.clip_norm=.inf", "train.clip_norm"),
    ("eval.max_loss=nan", "eval.max_loss"),
])
def test_every_config_number_is_finite(override, key):
    """NaN passes `value <= 0` (every comparison with NaN is false) and inf passes any upper
    bound: both are refused by name, from --set and from YAML."""
    with pytest.raises(ConfigError, match=rf"^{key}: must be a finite number, got -?(nan|inf)$"):
        build_config("tiny", overrides=[override])


def test_a_non_finite_number_in_a_yaml_file_names_file_line_and_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  train_steps: 5\n  learning_rate: .nan\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:3: train\.learning_rate: must be a finite"):
        build_config("tiny", str(path))


def test_a_config_built_in_code_is_checked_for_finite_numbers_too():
    import dataclasses
    config = build_config("tiny")
    broken = dataclasses.replace(config, train=dataclasses.replace(config.train,
                                                                   learning_rate=float("nan")))
    with pytest.raises(ConfigError, match=r"^train\.learning_rate: must be a finite number"):
        config_lib.validate(broken)


def test_duplicate_yaml_keys_are_a_named_error(tmp_path):
    """PyYAML keeps the last of two equal keys: one setting would be dropped without a word."""
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  learning_rate: 0.001\n  train_steps: 5\n  learning_rate: 0.002\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:4:3: .*duplicate key 'learning_rate' "
                                          r"\(first on line 2\)"):
        build_config("tiny", str(path))
    path.write_text("train: {train_steps: 5}\ndata: {seq_len: 64}\ntrain: {train_steps: 6}\n")
    with pytest.raises(ConfigError, match=r"c\.yaml:3:1: .*duplicate key 'train'"):
        build_config("tiny", str(path))
    with pytest.raises(ConfigError, match=r"override tune\.space: duplicate key 'd_model'"):
        build_config("tiny", overrides=["tune.space={d_model: [64], d_model: [128]}"])


def test_pathological_nesting_is_a_named_error_not_a_recursion_dump(tmp_path):
    deep = "[" * 10_000 + "]" * 10_000
    path = tmp_path / "c.yaml"
    path.write_text(f"train:\n  learning_rate: {deep}\n")
    with pytest.raises(ConfigError, match=r"^.*c\.yaml:2:\d+: invalid YAML: nested deeper than "
                                          r"\d+ levels$"):
        build_config("tiny", str(path))
    with pytest.raises(ConfigError, match=r"^override train\.learning_rate: nested deeper than"):
        build_config("tiny", overrides=[f"train.learning_rate={deep}"])


def test_a_non_finite_number_in_a_list_names_its_item():
    with pytest.raises(ConfigError, match=r"^tune\.space\.learning_rate\[1\]: must be a finite"):
        build_config("tiny", overrides=["tune.space.learning_rate=[0.001, .inf]"])
