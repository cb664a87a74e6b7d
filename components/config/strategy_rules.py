"""runtime.strategy=parameter_server's refusals: what asynchronous workers cannot keep
consistent, named with the reason before anything runs (components/training/parameter_server.py
holds what it does keep exact)."""

from __future__ import annotations

import json
import os

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
        (t.keep_best, "train.keep_best=true",
         "the chief does not validate while training: there is no best step to export"),
        (t.init_from != "none", f"train.init_from={t.init_from}",
         "the chief builds its model fresh on the ps: no warm start through the coordinator"),
    ]
    for refused, setting, reason in refusals:
        if refused:
            raise ConfigError(f"runtime.strategy=parameter_server cannot be combined with "
                              f"{setting}: {reason}")


def refuse_in_pipeline(config: Config, environ: dict | None = None) -> None:
    """What the pipeline cannot run with runtime.strategy=parameter_server, named before anything
    runs (`bigtrain run`'s plan; the Trainer checks the cluster again, chief_of_cluster): the
    Tuner (its trials train in its own process with loop.train, no cluster to coordinate), and a
    `bigtrain run` that is not the chief of a TF_CONFIG cluster with ps and worker tasks (environ:
    os.environ by default). The Trainer stage is the chief: it trains through the cluster, then
    exports; the Evaluator and the Pusher run unchanged (docs/training.md, "Parameter servers")."""
    if config.runtime.strategy != PARAMETER_SERVER:
        return
    if config.tune.trials > 0:
        raise ConfigError(f"runtime.strategy=parameter_server cannot be combined with "
                          f"tune.trials={config.tune.trials}: the Tuner's trials train in its own "
                          f"process without a cluster; tune with another strategy, then train "
                          f"with tune.trials=0")
    chief_of_cluster(os.environ if environ is None else environ)


def tf_config_jobs(raw: str, jobs: tuple[str, ...], error: type = ConfigError) -> tuple[dict, dict]:
    """TF_CONFIG's (cluster, task) for runtime.strategy=parameter_server, parsed without
    TensorFlow; `error` naming TF_CONFIG when it is not a JSON object or its cluster lacks one of
    `jobs` (this check and the strategy's own, components/training/strategy.py, share it)."""
    try:
        spec = json.loads(raw)
        cluster, task = spec.get("cluster") or {}, spec.get("task") or {}
    except (ValueError, AttributeError) as cause:
        raise error(f"TF_CONFIG is not a JSON object: {cause}") from cause
    missing = [job for job in jobs if not cluster.get(job)]
    if missing:
        raise error(f"runtime.strategy=parameter_server: TF_CONFIG's cluster has no "
                    f"{' and no '.join(missing)} task (it names {sorted(cluster)})")
    return cluster, task


def chief_of_cluster(environ) -> dict:
    """TF_CONFIG's cluster, checked without TensorFlow: ps and worker tasks, this task the chief
    (a ConfigError naming TF_CONFIG otherwise). The ps and worker tasks are the user's to start
    (`bigtrain plumbing ps-task`)."""
    raw = environ.get("TF_CONFIG")
    if not raw:
        raise ConfigError("runtime.strategy=parameter_server: `bigtrain run` is the chief of a "
                          "TF_CONFIG cluster; set TF_CONFIG (ps and worker tasks started with "
                          "`bigtrain plumbing ps-task`, this task {\"type\": \"chief\", "
                          "\"index\": 0}; docs/training.md, \"Parameter servers\")")
    cluster, task = tf_config_jobs(raw, ("ps", "worker", "chief"))
    if task.get("type") != "chief":
        raise ConfigError(f"runtime.strategy=parameter_server: `bigtrain run` trains as the chief; "
                          f"TF_CONFIG's task is {task!r} (the ps and worker tasks run `bigtrain "
                          f"plumbing ps-task`)")
    return cluster
