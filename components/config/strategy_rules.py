"""runtime.strategy=parameter_server's refusals: what asynchronous workers cannot keep
consistent, named with the reason before anything runs (components/training/parameter_server.py
holds what it does keep exact)."""

from __future__ import annotations

from components.config.tree import Config, ConfigError

PARAMETER_SERVER = "parameter_server"


def validate_parameter_server(config: Config) -> None:
    t, r = config.train, config.runtime
    if r.strategy != PARAMETER_SERVER:
        return
    refusals = [
        (t.shard_optimizer_state, "train.shard_optimizer_state=true (ZeRO-1)",
         "ZeRO-1 splits the AdamW moments over synchronous replicas that all-gather every step; "
         "asynchronous workers never meet, and the ps already hold the optimizer state once"),
        (r.pipeline_stages > 1, f"runtime.pipeline_stages={r.pipeline_stages}",
         "pipeline stages stream micro-batches through the host's devices in lock step; a "
         "parameter-server worker runs whole steps on its own"),
        (r.precision == "mixed_float16", "runtime.precision=mixed_float16",
         "its dynamic loss scale is read, halved and doubled by every step (a read-modify-write "
         "of the scale and its good-step count): concurrent workers race on it; use "
         "mixed_bfloat16 or float32 (no loss scale)"),
        (t.spike_rollback, "train.spike_rollback=true",
         "a rollback restores the last checkpoint while other workers keep applying updates to "
         "the ps: the restored weights would not be the checkpoint's"),
    ]
    for refused, setting, reason in refusals:
        if refused:
            raise ConfigError(f"runtime.strategy=parameter_server cannot be combined with "
                              f"{setting}: {reason}")


def refuse_in_pipeline(config: Config) -> None:
    """The pipeline's Trainer (and Tuner) train in their own process with loop.train: no cluster
    to coordinate. Checked by `bigtrain run` before anything runs and by the Trainer itself."""
    if config.runtime.strategy == PARAMETER_SERVER:
        raise ConfigError("runtime.strategy=parameter_server is not built into the pipeline's "
                          "Trainer yet: train as the chief of a TF_CONFIG cluster with `bigtrain "
                          "plumbing train-worker`, its ps and worker tasks with `bigtrain plumbing "
                          "ps-task` (docs/training.md, \"Parameter servers\")")
