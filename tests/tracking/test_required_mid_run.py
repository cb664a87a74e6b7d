"""tracking.required and a tracker lost mid-training: the fan-out raises TrackingError from the
step it failed on (the training loop stops there, its checkpoints kept), and `bigtrain run`
turns the failed stage into that named error, exit 10, not a plain stage failure (exit 1)."""

from __future__ import annotations

import pytest

from components.common.errors import EXIT_TRACKER, TrackingError
from components.config import build_config
from components.tracking.fanout import Trackers
from runners.local import run as local
from runners.local.home import LocalPaths


class LostAfterStart:
    name, where, run_id = "mlflow", "http://127.0.0.1:1", "r"

    def start(self, params, tags):
        return self.run_id

    def log_step(self, step, figures):
        raise ConnectionError("connection refused")


def test_a_required_tracker_lost_mid_training_is_exit_10(tmp_path):
    trackers = Trackers([LostAfterStart()], required=True)
    trackers.start(None, {})
    with pytest.raises(TrackingError) as lost:
        trackers.log_step(5, {"loss": 1.0})
    try:   # what TFX hands the runner: the stage's error, TrackingError in its chain
        raise RuntimeError("Trainer failed") from lost.value
    except RuntimeError as err:
        stage_error = err
    config = build_config("tiny", overrides=[f"paths.home={tmp_path}"])
    with pytest.raises(TrackingError, match="tracking.backends: mlflow at http://127.0.0.1:1 "
                                            "cannot be reached .*checkpoints are kept") as named:
        local._raise_named_failure(config, LocalPaths.for_config(config),
                                   (1, "RuntimeError: Trainer failed"), stage_error)
    assert named.value.exit_code == EXIT_TRACKER


def test_without_required_the_lost_tracker_is_dropped_and_training_goes_on():
    trackers = Trackers([LostAfterStart()], required=False)
    with pytest.warns(UserWarning, match="cannot be reached"):
        trackers.log_step(5, {"loss": 1.0})
    trackers.log_step(10, {"loss": 0.5})      # not called again: no second warning, no error
    assert trackers.live == [] and "mlflow" in trackers.lost
