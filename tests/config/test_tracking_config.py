"""The tracking section: its defaults, its places resolved under the home, and a clear error
naming the setting for an unknown backend, a repeated one or an unknown W&B mode."""

from __future__ import annotations

import os

import pytest

from components.config import ConfigError, build_config
from components.config.tracking import resolved


def test_the_default_is_tensorboard_only_and_not_required():
    config = build_config("tiny")
    assert config.tracking.backends == ("tensorboard",) and config.tracking.required is False


def test_every_backend_together_from_the_command_line(tmp_path):
    config = build_config("tiny", overrides=["tracking.backends=[tensorboard,mlflow,wandb]",
                                             f"paths.home={tmp_path}"])
    settings = resolved(config.tracking, config.paths.home)
    assert settings["backends"] == ["tensorboard", "mlflow", "wandb"]
    assert settings["mlflow_uri"] == "sqlite:///" + os.path.join(str(tmp_path), "mlflow.db")
    assert settings["wandb_dir"] == os.path.join(str(tmp_path), "wandb")
    assert settings["wandb_mode"] == "offline"


@pytest.mark.parametrize("override, named", [
    ("tracking.backends=[tensorboard,neptune]", "tracking.backends: 'neptune' is not one of"),
    ("tracking.backends=[mlflow,mlflow]", "tracking.backends: ['mlflow', 'mlflow'] names a backend twice"),
    ("tracking.wandb_mode=sometimes", "tracking.wandb_mode: 'sometimes' is not one of"),
    ("tracking.mlflow_experiment=' '", "tracking.mlflow_experiment: must not be blank"),
    ("tracking.server=x", "tracking.server"),
])
def test_a_bad_tracking_setting_is_an_error_naming_it(override, named):
    with pytest.raises(ConfigError) as caught:
        build_config("tiny", overrides=[override])
    assert named in str(caught.value)
