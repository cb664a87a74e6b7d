"""runtime.cluster and runtime.ray (components/config/cluster.py): each broken setting is a
ConfigError naming its key before anything runs, a valid Ray config passes, and where the
Trainer trains is not part of what it trains: the checkpoint key (stages.model_view of run_fn.TRAINER_READS) of a Ray
run equals a local run's, so either resumes the other's checkpoints."""

import pytest

from components.config import ConfigError, build_config

RAY = ("runtime.strategy=multi_worker_mirrored", "runtime.cluster=ray")


def test_a_ray_config_with_its_strategy_passes():
    config = build_config("tiny", overrides=[*RAY, "runtime.ray.workers=3",
                                              "runtime.ray.address=127.0.0.1:29200"])
    assert (config.runtime.cluster, config.runtime.ray.workers) == ("ray", 3)


@pytest.mark.parametrize("overrides, key", [
    (["runtime.cluster=slurm"], "runtime.cluster"),
    (["runtime.cluster=ray"], "runtime.strategy=multi_worker_mirrored"),   # mirrored, the default
    ([*RAY, "runtime.ray.workers=0"], "runtime.ray.workers"),
    ([*RAY, "runtime.ray.cpus_per_worker=-1"], "runtime.ray.cpus_per_worker"),
    ([*RAY, "runtime.ray.gpus_per_worker=nan"], "runtime.ray.gpus_per_worker"),
    ([*RAY, "runtime.ray.max_failures=-2"], "runtime.ray.max_failures"),
    ([*RAY, "runtime.ray.address="], "runtime.ray.address"),
    ([*RAY, "train.init_from=hf:/models/x"], "train.init_from"),
    ([*RAY, "tracking.backends=[tensorboard,mlflow]"], "tracking.backends"),
    ([*RAY, "tune.trials=2"], "tune.trials"),
])
def test_each_broken_setting_names_its_key(overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace("[", r"\[")):
        build_config("tiny", overrides=overrides)


def test_where_it_trains_is_not_in_the_checkpoint_key():
    from components.config import stages
    from components.training.run_fn import TRAINER_READS

    def training_view(config):
        return stages.model_view(TRAINER_READS, config)
    local = build_config("tiny", overrides=["runtime.strategy=multi_worker_mirrored"])
    ray = build_config("tiny", overrides=[*RAY, "runtime.ray.workers=4",
                                          "runtime.ray.address=10.0.0.1:6379"])
    assert training_view(ray) == training_view(local)
    assert "cluster" not in training_view(ray)["runtime"]
