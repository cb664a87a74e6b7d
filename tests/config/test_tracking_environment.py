"""Issue 57 (9): trackers follow their ecosystem's conventions. An empty tracking setting reads
the variable MLflow's and W&B's own clients read (MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME,
WANDB_DIR, WANDB_MODE, WANDB_PROJECT), else bigtrain's default under the home; a value in the
config wins; the report names the store each tracker wrote to and where that came from."""

from __future__ import annotations

import os

import pytest

from components.config import ConfigError, build_config
from components.config.tracking import ENVIRONMENT, resolved
from runners.local.tracking import tracker_stores

VARIABLES = {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5999", "MLFLOW_EXPERIMENT_NAME": "team-exp",
             "WANDB_DIR": "/srv/wandb-runs", "WANDB_MODE": "disabled", "WANDB_PROJECT": "team"}


def _settings(tmp_path, environ, *overrides):
    config = build_config("tiny", overrides=[f"paths.home={tmp_path}", *overrides])
    return resolved(config.tracking, config.paths.home, environ)


def test_without_variables_the_home_defaults(tmp_path):
    s = _settings(tmp_path, {})
    assert s["mlflow_uri"] == "sqlite:///" + os.path.join(str(tmp_path), "mlflow.db")
    assert s["wandb_dir"] == os.path.join(str(tmp_path), "wandb")
    assert (s["mlflow_experiment"], s["wandb_mode"], s["wandb_project"]) == ("bigtrain", "offline",
                                                                             "bigtrain")
    assert set(s["sources"].values()) == {"default"}


def test_each_empty_setting_reads_its_ecosystems_variable(tmp_path):
    s = _settings(tmp_path, VARIABLES)
    assert (s["mlflow_uri"], s["mlflow_experiment"], s["wandb_dir"], s["wandb_mode"],
            s["wandb_project"]) == tuple(VARIABLES.values())
    assert s["sources"] == {key: "$" + name for key, name in ENVIRONMENT.items()}


@pytest.mark.parametrize("key", sorted(ENVIRONMENT))
def test_the_config_wins_over_the_variable(tmp_path, key):
    value = {"mlflow_uri": "sqlite:////tmp/own.db", "wandb_dir": "/tmp/own-wandb",
             "wandb_mode": "online"}.get(key, "own")
    s = _settings(tmp_path, VARIABLES, f"tracking.{key}={value}")
    assert s[key] == value and s["sources"][key] == "config"
    others = {k for k in ENVIRONMENT if k != key}
    assert {s["sources"][k] for k in others} == {"$" + ENVIRONMENT[k] for k in others}


def test_a_blank_variable_is_unset(tmp_path):
    s = _settings(tmp_path, {"MLFLOW_TRACKING_URI": "  ", "WANDB_MODE": ""})
    assert s["mlflow_uri"].startswith("sqlite:///") and s["wandb_mode"] == "offline"


def test_a_bad_wandb_mode_from_the_environment_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    with pytest.raises(ConfigError) as caught:
        build_config("tiny")
    assert "$WANDB_MODE (tracking.wandb_mode empty): 'sometimes' is not one of" in str(caught.value)
    assert build_config("tiny", overrides=["tracking.wandb_mode=offline"])  # the config wins


def test_the_report_line_names_each_trackers_store_and_its_source(tmp_path):
    s = _settings(tmp_path, {"MLFLOW_TRACKING_URI": "http://127.0.0.1:5999"})
    assert tracker_stores(s, {"wandb": "run-1", "mlflow": "ab12"}) == [
        ("mlflow", "ab12", "http://127.0.0.1:5999 ($MLFLOW_TRACKING_URI)"),
        ("wandb", "run-1", os.path.join(str(tmp_path), "wandb") + " (default)")]
