"""What reaches the Trainer: the default config keeps the Trainer's custom_config (its TFX cache
key) as it was; another tracking section travels resolved, and run_fn's trackers open on the
run identity the executor adds (the bigtrain run id); without it, TensorBoard only."""

from __future__ import annotations

import json

from components.config import build_config
from components.training.run_fn import TRACKING, TRACKING_RUN, trainer_custom_config, training_trackers


def test_the_default_adds_nothing_to_the_trainers_cache_key(tmp_path):
    config = build_config("tiny", overrides=[f"paths.home={tmp_path}"])
    assert TRACKING not in trainer_custom_config(config, str(tmp_path / "ckpt"))


def test_copy_artifacts_does_not_change_the_trainers_cache_key(tmp_path):
    """Copies are made by the run's last phase: choosing them must not train again (caught: the
    whole tracking section in the key)."""
    def key(*extra):
        config = build_config("tiny", overrides=[f"paths.home={tmp_path}", *extra])
        return trainer_custom_config(config, str(tmp_path / "ckpt"))
    assert key("tracking.copy_artifacts=[PushedModel]") == key()
    assert (key("tracking.backends=[mlflow]", "tracking.copy_artifacts=[Model]")
            == key("tracking.backends=[mlflow]"))


def test_trackers_travel_resolved_and_open_on_the_executors_run_id(tmp_path):
    config = build_config("tiny", overrides=[f"paths.home={tmp_path}",
                                             "tracking.backends=[mlflow]"])
    custom = trainer_custom_config(config, str(tmp_path / "ckpt"))
    settings = json.loads(custom[TRACKING])
    assert settings["mlflow_uri"] == f"sqlite:///{tmp_path}/mlflow.db"
    with training_trackers(custom) as trackers:     # no run identity: TensorBoard only
        assert trackers is None
    custom[TRACKING_RUN] = json.dumps({"run_id": "r1", "pipeline_name": "p"})
    with training_trackers(custom) as trackers:
        assert [t.name for t in trackers.live] == ["mlflow"] and not trackers.tensorboard
        assert trackers.ids()["mlflow"]
