"""The Trainer's training on a Ray cluster (runtime.cluster=ray): Ray Train's TensorflowTrainer
starts runtime.ray.workers workers with their resources, sets each one's TF_CONFIG, and every
worker runs loop.train with MultiWorkerMirroredStrategy, as a `bigtrain plumbing train-worker`
does. Checkpoints go to the Trainer's checkpoint folder and the run's figures to its model_run
folder: a file system every node sees (or s3://). A lost worker makes Ray restart the whole group
(runtime.ray.max_failures), which resumes from the last checkpoint. The chief writes the final
weights and its figures under <model_run>/ray_job/; the Trainer's own process reads them back
into a model of its own and evaluates and exports it as after a local run."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import socket

import numpy as np

from components.storage import fs
from components.common.errors import BigtrainError

JOB_DIR = "ray_job"   # in the model_run folder: Ray's storage, the chief's weights and figures
WEIGHTS, SUMMARY, STARTS = "weights.npz", "summary.json", "starts"
FIRST_STEP = "first_step"   # the chief's [step, loss] of the first step it trained
# The Trainer's environment variables every worker gets (object-store credentials, bigtrain's
# own settings): a Ray worker inherits its node's environment, not the Trainer's.
FORWARDED_ENV = ("BIGTRAIN_", "AWS_", "S3_", "TF_CPP_MIN_LOG_LEVEL")
LOGGER = logging.getLogger("bigtrain.train")


class RayJobError(BigtrainError):
    """The Ray cluster could not be reached, or the job failed past runtime.ray.max_failures
    (exit 1, a stage failed; the cause chained)."""


def job_dir(model_run_dir: str) -> str:
    return fs.join(model_run_dir, JOB_DIR)


def forwarded_env(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    return {name: value for name, value in environ.items() if name.startswith(FORWARDED_ENV)}


def scaling(ray_config) -> dict:
    """ScalingConfig's arguments for runtime.ray: workers and the resources each holds."""
    resources = {"CPU": ray_config.cpus_per_worker}
    if ray_config.gpus_per_worker:
        resources["GPU"] = ray_config.gpus_per_worker
    return dict(num_workers=ray_config.workers, use_gpu=ray_config.gpus_per_worker > 0,
                resources_per_worker=resources)


def check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """RayJobError naming runtime.ray.address when a host:port takes no TCP connection (ray.init
    would retry for minutes); `auto` is Ray's to resolve."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as error:
        raise RayJobError(f"runtime.ray.address={address}: no Ray head answers there ({error}); "
                          f"start one (`make ray`, or `ray start --head`) or give the head's "
                          f"host:port") from error


def connect(address: str) -> None:
    """ray.init on runtime.ray.address, the forwarded environment in every worker."""
    check_reachable(address)
    import ray
    try:
        ray.init(address=address, runtime_env={"env_vars": forwarded_env()},
                 log_to_driver=True, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RayJobError(f"runtime.ray.address={address}: no Ray cluster there ({error}); start "
                          f"one (`make ray`, or `ray start --head`) or give the head's "
                          f"host:port") from error


def train_on_ray(config, train_files, eval_files, model_run_dir: str, checkpoint_dir: str,
                 on_step=None):
    """loop.train's TrainResult for a job of runtime.ray.workers workers on the cluster, its model
    rebuilt in this process from the chief's final weights; on_step(step, loss) is called here
    once, with the first step the chief trained (as loop.train's hook is first called)."""
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.tensorflow import TensorflowTrainer
    from components import config as config_lib
    settings, folder = config.runtime.ray, job_dir(model_run_dir)
    fs.makedirs(fs.join(folder, STARTS))
    connect(settings.address)
    job = {"config": config_lib.to_dict(config), "train_files": list(train_files),
           "eval_files": list(eval_files or []), "model_run_dir": model_run_dir,
           "checkpoint_dir": checkpoint_dir, "job_dir": folder}
    trainer = TensorflowTrainer(
        worker_loop, train_loop_config=job, scaling_config=ScalingConfig(**scaling(settings)),
        run_config=RunConfig(name="train", storage_path=fs.absolute(folder),
                             failure_config=FailureConfig(max_failures=settings.max_failures)))
    try:
        result = trainer.fit()
        error = getattr(result, "error", None)
    except Exception as failed:   # Ray Train V2 raises; the cause goes along
        error = failed
    finally:
        ray.shutdown()
    if error is not None:
        raise RayJobError(f"the Ray training job ({settings.workers} workers at "
                          f"{settings.address}) failed past runtime.ray.max_failures="
                          f"{settings.max_failures}: {error}") from error
    log_restarts(folder)
    return read_result(config, folder, on_step)


def log_restarts(folder: str) -> int:
    """Logs (warning) how often Ray restarted the worker group; returns the number of starts."""
    starts = sorted(fs.listdir(fs.join(folder, STARTS)))
    if len(starts) > 1:
        notes = [json.loads(fs.read_text(fs.join(folder, STARTS, name))) for name in starts]
        LOGGER.warning("Ray restarted the training workers %d time(s) after a lost worker; the "
                       "starts resumed from %s (Ray's own log of the failure: the driver's output "
                       "and the cluster's session folder; these notes: %s)", len(starts) - 1,
                       ", ".join(str(n["resumes_from"]) for n in notes), fs.join(folder, STARTS))
    return len(starts)


def worker_loop(job: dict) -> None:
    """One Ray Train worker: TF_CONFIG is Ray's; the same loop.train as a train-worker's."""
    import ray.train
    from components import config as config_lib
    from components.training import loop
    from components.training.strategy import make_strategy
    config = config_lib.from_dict(config_lib.Config, job["config"])
    strategy = make_strategy(config.runtime)   # first: collectives start before other TF ops
    context = ray.train.get_context()
    LOGGER.info("Ray worker %d of %d (pid %d)", context.get_world_rank(),
                context.get_world_size(), os.getpid())
    if context.get_world_rank() == 0:
        _record_start(job["job_dir"], job["checkpoint_dir"])
    first = {}   # the first step this start trained, and its loss (the Trainer's on_step)
    result = loop.train(config, job["train_files"], job["model_run_dir"], job["checkpoint_dir"],
                        strategy=strategy, validation=_validation(config, job),
                        on_step=lambda step, loss: first.setdefault(FIRST_STEP, [step, loss]))
    figures = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
               if f.name != "model"}
    figures.update(first)
    if result.is_chief:
        buffer = io.BytesIO()
        np.savez(buffer, *result.model.get_weights())
        fs.write_bytes(fs.join(job["job_dir"], WEIGHTS), buffer.getvalue())
        fs.write_text(fs.join(job["job_dir"], SUMMARY), json.dumps(figures, indent=2))
    ray.train.report({"steps": result.steps, "final_loss": result.final_loss})


def _record_start(folder: str, checkpoint_dir: str) -> None:
    """The chief's note of one start of the group: its pid and the checkpoint it resumes from."""
    import tensorflow as tf
    name = f"{len(fs.listdir(fs.join(folder, STARTS))):04d}.json"
    fs.write_text(fs.join(folder, STARTS, name), json.dumps(
        {"pid": os.getpid(), "resumes_from": tf.train.latest_checkpoint(checkpoint_dir)}))


def _validation(config, job: dict):
    from components.tokenizer.artifact import examples_tokenizer
    from components.training.validation import Validation
    if not job["eval_files"]:
        return None
    examples_uri = os.path.dirname(os.path.dirname(job["train_files"][0]))  # <uri>/Split-train/*
    return Validation.from_config(config, job["eval_files"],
                                  examples_tokenizer(examples_uri, config.data, "Trainer"))


def read_result(config, folder: str, on_step=None):
    """The chief's TrainResult: its figures, and a model built here holding its final weights."""
    from components.model.gpt import build_model
    from components.tokenizer.spec import token_spec
    from components.training.loop import TrainResult
    figures = json.loads(fs.read_text(fs.join(folder, SUMMARY)))
    first = figures.pop(FIRST_STEP, None)
    if first and on_step:
        on_step(*first)
    saved = np.load(io.BytesIO(fs.read_bytes(fs.join(folder, WEIGHTS))))
    model = build_model(config.model, config.data.seq_len, config.runtime.precision,
                        config.train.remat, vocab_size=token_spec(config.data).vocab_size)
    model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])
    return TrainResult(model=model, **figures)
