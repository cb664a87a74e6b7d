"""Values outside their meaning and names that would become several path parts are config
errors naming the key (issue 41's probes: clip_norm=0 "completed" an untrained run, adam_beta1=1.5
and adam_beta2=-1 passed, model.name=.. pushed outside the serving folder); a YAML alias bomb
and a config "file" that is a device are refused before they grow memory or hang.

Each case failed on the code before (exit 0 or a hang); the boundaries are exact (beta 0 and
clip_norm's smallest positive value pass, beta 1 does not)."""

import os
import resource

import pytest

from components.config import ConfigError, build_config
from components.config.loading import MAX_YAML_NODES, load_yaml, strict_yaml
from components.config.loading import YAMLStructureError


@pytest.mark.parametrize("override, key", [
    ("train.clip_norm=0", "train.clip_norm"), ("train.clip_norm=-1", "train.clip_norm"),
    ("train.adam_beta1=1.5", "train.adam_beta1"), ("train.adam_beta1=1.0", "train.adam_beta1"),
    ("train.adam_beta2=-1", "train.adam_beta2"), ("train.weight_decay=-0.1", "train.weight_decay"),
    ("train.min_learning_rate=-1e-4", "train.min_learning_rate"),
    ("train.train_steps=100000000000000000000000000000", "train.train_steps"),
    ("train.global_batch_size=2147483648", "train.global_batch_size"),
    ("model.name=..", "model.name"), ("model.name=../../x", "model.name"),
    ("model.name=a/b", "model.name"), ("model.name=''", "model.name"),
    ("paths.pipeline_name=../../escape", "paths.pipeline_name"), ("paths.home=''", "paths.home"), ("model.name=.hidden", "model.name")])
def test_a_value_outside_its_meaning_is_a_config_error_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=f"^{key.replace('.', '[.]')}: "):
        build_config("tiny", overrides=[override])


def test_the_boundaries_that_mean_something_pass():
    config = build_config("tiny", overrides=[
        "train.adam_beta1=0", "train.adam_beta2=0.999999", "train.clip_norm=1e-9",
        "train.weight_decay=0", "train.min_learning_rate=0", "model.name=gpt-2.small_v1"])
    assert config.train.adam_beta1 == 0.0 and config.model.name == "gpt-2.small_v1"


def test_a_yaml_alias_bomb_is_refused_without_expanding_it():
    bomb = "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 9)}]\n"
                   for i in range(9))
    assert len(bomb) < 600
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(YAMLStructureError, match=f"expand to more than {MAX_YAML_NODES:,} nodes"):
        strict_yaml(bomb)
    flow = "[" + ", ".join(f"&a{i} [" + ", ".join([f"*a{i - 1}" if i else "x"] * 9) + "]"
                           for i in range(9)) + "]"
    with pytest.raises(ConfigError, match=r"override data.exclude: its aliases expand to more"):
        build_config("tiny", overrides=[f"data.exclude={flow}"])
    # nothing grew: well under 100 MB more than before (the bomb expands to ~10^9 nodes)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 100_000
    assert strict_yaml("x: &a [1, 2]\ny: [*a, *a]\n") == {"x": [1, 2], "y": [[1, 2], [1, 2]]}


def test_a_config_file_that_is_not_a_regular_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="/dev/zero: not a config file"):
        load_yaml("/dev/zero")
    with pytest.raises(ConfigError, match="not a config file"):
        load_yaml(str(tmp_path))
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="not a config file"):
        load_yaml(str(big))
    assert os.path.exists(big)


def test_an_empty_home_option_is_a_config_error_not_the_default_home(tmp_path, capsys, monkeypatch):
    from runners.cli import app as cli
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lineage", "runs", "--home", ""]) == 2
    assert "--home: empty" in capsys.readouterr().err and not (tmp_path / "bigtrain_home").exists()
