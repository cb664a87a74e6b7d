"""runtime.strategy=parameter_server: asynchronous training on parameter servers.

A TF_CONFIG cluster as TensorFlow defines it: `ps` tasks hold the variables, `worker` tasks run
steps, the `chief` coordinates (tf.distribute.coordinator.ClusterCoordinator). The ps and worker
tasks only serve (`serve`: a tf.distribute.Server, `bigtrain plumbing ps-task`); the chief
(`bigtrain plumbing train-worker` with task type chief) builds bigtrain's own model, AdamW and
step (loop.build_training, train_step.make_train_step) and schedules that step on whichever
worker is free. Each step reads the variables from the ps, computes its gradient on its own
batch and applies it there: no step waits for another (asynchronous), so a gradient may be
computed on weights a few updates old (staleness), the price of never waiting for a slow or
dead worker.

Exact under concurrent workers (tests/training/test_parameter_server.py):
  the step counter (TrainState.step) and the tokens seen (Counters.tokens_seen): resource
    variables on a ps, incremented by their own AssignAddVariableOp, which holds the variable's
    lock: N applied steps count exactly N;
  the optimizer's iterations (Adam's bias correction): Keras' Variable.assign_add is
    assign(self + value), a read then a write, and loses increments when two workers interleave
    (92-103 counted for 120 steps, 2026-12-07); `exact_iterations` makes it the variable's own
    assign_add.
Read from them: the learning-rate schedule and the dropout seeds read the step counter at the
start of a step; two steps in flight at once may read the same value (the same rate, the same
dropout seed on different batches). What a re-run closure means: a worker that dies after its
update reached the ps but before the coordinator heard of it has its step run again elsewhere
(TensorFlow's at-least-once scheduling): that update then counts twice, as it was applied twice;
the coordinator stops on the counter (updates applied), never on the number it scheduled.

Checkpoints: the chief saves every train.checkpoint_every steps (all scheduled steps joined
first) and resumes from the newest. The input position is approximate: worker w reads global
batches w, w + W, ... of the one input order from the checkpoint's step on, and workers run at
their own pace, so which batches trained before a checkpoint is not recorded (the per-worker
iterator cannot be checkpointed): a resumed run may see a few batches again or skip a few.

Refused (components/config/rules.py validate_parameter_server): sharded variables (no variable
partitioner is ever passed: TF 2.16's ShardedVariable breaks the gradient and Checkpoint.save),
ZeRO-1, pipeline stages, dynamic loss scaling, spike rollback.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import keras
import numpy as np
import tensorflow as tf

from components.storage import checkpoints
from components.tokenizer.spec import token_spec
from components.training import input as input_lib
from components.training.strategy import SERVER_ROLES, make_strategy, parameter_server_resolver

LOGGER = logging.getLogger("bigtrain.train")


def serve(resolver=None) -> None:
    """This TF_CONFIG task's tf.distribute.Server (type ps or worker), serving until killed."""
    resolver = resolver or parameter_server_resolver()
    if resolver.task_type not in SERVER_ROLES:
        raise ValueError(f"TF_CONFIG task type {resolver.task_type!r}: `bigtrain plumbing ps-task` "
                         f"serves the {' and '.join(SERVER_ROLES)} tasks; the chief runs "
                         f"`bigtrain plumbing train-worker`")
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")   # a lost peer fails fast, not hangs
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    LOGGER.info("serving %s %d at %s", resolver.task_type, resolver.task_id, server.target)
    server.join()


class Counters(tf.Module):
    """Counters of a parameter-server run besides TrainState (created under strategy.scope())."""

    def __init__(self):
        super().__init__(name="ps_counters")
        self.tokens_seen = tf.Variable(0, dtype=tf.int64, trainable=False, name="tokens_seen")


def atomic_increment(variable, value=1):
    """variable += value with the variable's own AssignAddVariableOp (one op under the variable's
    lock on its ps), where a Keras Variable's assign_add reads, adds and assigns (two ops)."""
    target = variable.value if isinstance(variable, keras.Variable) else variable
    return target.assign_add(tf.cast(value, target.dtype))


def exact_iterations(optimizer) -> None:
    """Make the optimizer's step counter (Keras' base apply(): self._iterations.assign_add(1))
    count with atomic_increment."""
    iterations = optimizer._iterations
    iterations.assign_add = lambda value: atomic_increment(iterations, value)


def dataset_fn(config, train_files, start_step: int, workers: int):
    """Each worker's global batches: of the one input order every strategy reads
    (input.make_dataset, from the checkpoint's step on), worker w takes batches w, w + W, ...:
    disjoint while no worker fails (a re-run step reads its new worker's next batch)."""
    t = config.train
    files = input_lib.sorted_files(train_files)

    def per_worker(_context=None):
        index = tf.distribute.coordinator.experimental_get_current_worker_index()
        return input_lib.make_dataset(files, config.data.seq_len, t.global_batch_size,
                                      streams=1, shuffle_buffer=t.shuffle_buffer, seed=t.seed,
                                      start_step=start_step).shard(workers, index)

    return per_worker


@dataclasses.dataclass
class PsResult:
    model: keras.Model
    steps: int
    resumed_from_step: int
    skipped_steps: int
    iterations: int
    tokens_seen: int
    scheduled: int
    final_loss: float
    tokens_per_second: float
    workers: int
    checkpoint: str | None


def _value(variable) -> int | float:
    """A scalar variable (tf or Keras; its one copy on a ps) as a Python number."""
    variable = variable.value if isinstance(variable, keras.Variable) else variable
    return variable.read_value().numpy().item()


def _restore(checkpoint, checkpoint_dir: str):
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=3,
                                         checkpoint_name=checkpoints.CHECKPOINT_NAME)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        LOGGER.info("resumed from %s (step %d)", manager.latest_checkpoint,
                    _value(checkpoint.state.step))
    return manager


def _make_ps_step(config, model, optimizer, strategy, state, counters):
    """bigtrain's own step (train_step.make_train_step: the same loss, clipping, AdamW) and the
    tokens it trained on, as one function a worker runs."""
    from components.training.train_step import make_train_step
    t = config.train
    step_fn = make_train_step(model, optimizer, strategy, state,
                              global_batch_size=t.global_batch_size,
                              accumulation_steps=t.accumulation_steps, clip_norm=t.clip_norm,
                              dynamic_loss_scale=False, seed=t.seed, xla=False,
                              pad_id=token_spec(config.data).pad_id)
    tokens_per_step = t.global_batch_size * config.data.seq_len

    @tf.function(autograph=False)
    def ps_step(iterator):
        loss, _, _ = step_fn(iterator)
        atomic_increment(counters.tokens_seen, tokens_per_step)
        return loss

    return ps_step


def _final_loss(losses: list, window: int) -> float:
    """The mean loss of the last train.log_every steps scheduled (each on its own worker's batch
    and weights as they were then: noisier than a synchronous step's loss); NaN if none ran."""
    return float(np.mean(losses[-window:])) if losses else float("nan")


def _schedule_rounds(coordinator, ps_step, iterator, state, manager, t) -> tuple[int, list]:
    """Schedule steps up to each checkpoint, join, save; until the step counter (updates applied)
    reaches train.train_steps. Returns (steps scheduled, the last round's losses)."""
    from components.training.loop import next_checkpoint_step
    scheduled, losses = 0, []
    step = _value(state.step)
    while step < t.train_steps:
        wanted = next_checkpoint_step(step, t) - step
        results = [coordinator.schedule(ps_step, args=(iterator,)) for _ in range(wanted)]
        coordinator.join()
        scheduled += wanted
        losses = [float(r.fetch()) for r in results]
        step = _value(state.step)
        path = manager.save(checkpoint_number=step)
        LOGGER.info("step %d of %d: mean loss %.4f over %d steps; checkpoint %s", step,
                    t.train_steps, float(np.mean(losses)), wanted, path)
    return scheduled, losses


def train_coordinated(config, train_files, checkpoint_dir: str, *, strategy=None) -> PsResult:
    """The chief's part: build, restore, schedule bigtrain's step on the workers until
    train.train_steps updates are applied, checkpointing every train.checkpoint_every."""
    from components.training.loop import build_training
    t = config.train
    keras.utils.set_random_seed(t.seed)
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    strategy = strategy or make_strategy(config.runtime)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    model, state, optimizer, _ = build_training(config, strategy)
    exact_iterations(optimizer)
    with strategy.scope():
        counters = Counters()
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, state=state,
                                     counters=counters)
    manager = _restore(checkpoint, checkpoint_dir)
    resumed = _value(state.step)
    workers = strategy.extended._num_workers   # TF_CONFIG's worker tasks
    iterator = iter(coordinator.create_per_worker_dataset(
        dataset_fn(config, train_files, resumed, workers)))
    ps_step = _make_ps_step(config, model, optimizer, strategy, state, counters)
    LOGGER.info("parameter servers: %d worker(s), %d ps, from step %d", workers,
                strategy.extended._num_ps, resumed)
    started = time.perf_counter()
    scheduled, losses = _schedule_rounds(coordinator, ps_step, iterator, state, manager, t)
    elapsed, steps = time.perf_counter() - started, _value(state.step)
    return PsResult(model=model, steps=steps, resumed_from_step=resumed,
                    skipped_steps=_value(state.skipped_steps),
                    iterations=_value(optimizer.iterations), tokens_seen=_value(counters.tokens_seen),
                    scheduled=scheduled, final_loss=_final_loss(losses, t.log_every),
                    tokens_per_second=(steps - resumed) * t.global_batch_size * config.data.seq_len
                    / max(elapsed, 1e-9), workers=workers, checkpoint=manager.latest_checkpoint)


def summary(result: PsResult) -> dict:
    """The train-worker's JSON line for a parameter-server chief."""
    return {field.name: getattr(result, field.name) for field in dataclasses.fields(result)
            if field.name != "model"}


def trainer_result(result: PsResult, config):
    """The chief's result as the pipeline's Trainer records it (loop.TrainResult): num_replicas
    is the cluster's worker tasks; no loss scale (refused), no rollbacks, no validation."""
    from components.model.gpt import flops_per_token, parameter_count
    from components.training.loop import TrainResult
    return TrainResult(
        model=result.model, steps=result.steps, resumed_from_step=result.resumed_from_step,
        skipped_steps=result.skipped_steps, final_loss=result.final_loss,
        tokens_seen=result.tokens_seen, tokens_per_second=result.tokens_per_second,
        parameter_count=parameter_count(result.model),
        flops_per_token=flops_per_token(result.model, config.data.seq_len),
        num_replicas=result.workers, loss_scale=1.0)
