"""The training loop: strategy, model, optimizer, checkpoints, resume, logs; then evaluation.

`train()` is a plain function: run_fn calls it, and so do the tests (which inject a fault at a
step to prove that resuming from the last checkpoint ends exactly where an uninterrupted run ends).
It also stops on SIGTERM/SIGINT with a checkpoint (stopping.py) and, with train.spike_rollback,
rolls a loss spike back to the last checkpoint (_roll_back; the rule in spikes.py).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from components.storage import checkpoints
from components.common.faults import pause_if_set
from components.model.gpt import build_model, flops_per_token, parameter_count
from components.tokenizer.spec import token_spec
from components.training import memory, pipeline_stages
from components.training.feed import InputFeed
from components.training.optimizer import make_optimizer, make_schedule
from components.common.errors import TrainingPreempted
from components.training.spikes import MAX_ROLLBACKS_TO_ONE_CHECKPOINT
from components.training.stopping import StopRequest, agreed_stop
from components.training.strategy import make_strategy
from components.training.train_step import TrainState, make_train_step
from components.training.validation import Validation, summary_figures
from components.training.window import StepLog, StepWindow, TrainingDiverged


class InjectedFault(RuntimeError):
    """Raised by train(fault_at_step=k) right after step k, before any later checkpoint."""


# runtime.xla=auto, per device type: the faster of the plain and the jit-compiled step, as measured.
# CPU: XLA (since 2026-12-07). The default run (1,000 steps, one replica) on the AMD EPYC 2-core
#   VM, quiet, off/on alternated twice: 0.95x and 0.81x the training loop's wall, 0.90x and 0.79x
#   the process CPU-s, the compile included, eval bits/byte 1.9391 against 1.9419
#   (docs/benchmarks.md "CPU defaults"). A short run pays the compile (tens of seconds) and a
#   compiled step draws other dropout masks: the tests not about XLA set runtime.xla=off.
# GPU: on (not measured here: no GPU was lent to this work; the usual win, XLA fusing the
#   elementwise ops around the matmuls).
AUTO_XLA = {"CPU": True, "GPU": True}


def use_xla(runtime) -> bool:
    """runtime.xla: on / off, or auto = AUTO_XLA for the device type the step runs on."""
    if runtime.xla != "auto":
        return runtime.xla == "on"
    return AUTO_XLA["GPU" if tf.config.list_physical_devices("GPU") else "CPU"]


@dataclasses.dataclass
class TrainResult:
    model: keras.Model
    steps: int
    resumed_from_step: int
    skipped_steps: int
    final_loss: float
    tokens_seen: int
    tokens_per_second: float
    parameter_count: int
    flops_per_token: int
    num_replicas: int
    loss_scale: float
    is_chief: bool = True
    rollbacks: int = 0          # train.spike_rollback: checkpoints restored after a spike
    skipped_batches: int = 0    # global batches those rollbacks skipped
    validation: dict = dataclasses.field(default_factory=dict)   # validation.summary_figures


def _value(variable):
    """A (possibly mirrored) scalar variable as a Python number."""
    return variable.read_value().numpy().item()


LOGGER = logging.getLogger("bigtrain.train")


def is_chief(strategy) -> bool:
    """True unless this process is a non-chief worker of a multi-worker cluster (TF_CONFIG)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    cluster = resolver.cluster_spec().as_dict()
    if "chief" in cluster:
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and resolver.task_id == 0


def worker_count(strategy) -> int:
    """The processes of a multi-worker cluster (TF_CONFIG's chief and workers); 1 otherwise."""
    resolver = getattr(strategy, "cluster_resolver", None)
    cluster = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return max(1, len(cluster.get("chief", [])) + len(cluster.get("worker", [])))


def _log(message: str, *args) -> None:
    LOGGER.info(message, *args)


def build_training(config, strategy, prepare_model=None):
    """Model, TrainState, optimizer and schedule for a config: the model and state under
    strategy.scope(), the optimizer as optimizer.make_optimizer builds it for the strategy.
    `prepare_model(model)` (warm start, freezing) runs before the optimizer exists."""
    t = config.train
    with strategy.scope():
        if config.runtime.pipeline_stages > 1:  # each stage builds its blocks on its device
            model = pipeline_stages.build_staged_model(
                config.model, config.data.seq_len, config.runtime.precision, t.remat,
                token_spec(config.data).vocab_size, config.runtime.pipeline_stages)
        else:
            model = build_model(config.model, config.data.seq_len, config.runtime.precision,
                                t.remat, vocab_size=token_spec(config.data).vocab_size)
        if prepare_model:
            prepare_model(model)
        state = TrainState()
    # The learning rate reads the step counter that also stops the run (skipped steps included).
    optimizer = make_optimizer(t, model, step=state.step, strategy=strategy)
    # What was built, read from the objects (not the config): the e2e test checks these lines.
    if hasattr(model, "stage_devices"):
        _log("model parallel: %d pipeline stages on %s", len(model.stage_devices),
             ", ".join(model.stage_devices))
    if hasattr(optimizer, "update_own_slice"):
        _log("optimizer state sharded over %d replicas (ZeRO-1)", strategy.num_replicas_in_sync)
    return model, state, optimizer, make_schedule(t)   # the schedule: what the step log reads


def pipeline_gradient_fn(config, model, state):
    """The GPipe gradient function with runtime.pipeline_stages > 1, else None (train_step's)."""
    if config.runtime.pipeline_stages == 1:
        return None
    return pipeline_stages.make_pipeline_gradient_fn(
        model, state, global_batch_size=config.train.global_batch_size,
        accumulation_steps=config.train.accumulation_steps,
        dynamic_loss_scale=config.runtime.precision == "mixed_float16", seed=config.train.seed,
        pad_id=token_spec(config.data).pad_id)


def _describe_and_check(config, model, replicas: int, device_memory: float
                        ) -> tuple[int, int, bool]:
    """Log the model, batch split, remat/XLA and memory estimate; raise when it cannot fit.
    Returns (parameter count, training FLOPs per token, XLA on)."""
    t, runtime = config.train, config.runtime
    n_params = parameter_count(model)
    flops = flops_per_token(model, config.data.seq_len)
    _log("model %s: %s parameters, %.3g training FLOPs/token, %d replica(s), precision %s, "
         "global batch %d = %d replicas x %d micro-batches x %d", config.model.name, f"{n_params:,}",
         flops, replicas, runtime.precision, t.global_batch_size, replicas, t.accumulation_steps,
         t.global_batch_size // (replicas * t.accumulation_steps))
    xla = use_xla(runtime)
    _log("remat %s, XLA %s (runtime.xla=%s)", t.remat, "on" if xla else "off", runtime.xla)
    needed = memory.estimate(config, n_params, replicas, device_memory)
    _log("%s", needed.describe())
    memory.check(config, needed, replicas)
    return n_params, flops, xla


def _worker_dirs(strategy, checkpoint_dir: str, model_run_dir: str) -> tuple[str, str]:
    """A non-chief worker's own folders: every worker must take part in saving (collectives),
    but only the chief's files count."""
    task = strategy.cluster_resolver.task_id
    return checkpoints.worker_dir(checkpoint_dir, task), checkpoints.worker_dir(model_run_dir, task)


def next_checkpoint_step(step: int, t) -> int:
    """The first checkpoint step after `step`: the next multiple of train.checkpoint_every, or
    the last step."""
    return min((step // t.checkpoint_every + 1) * t.checkpoint_every, t.train_steps)


@dataclasses.dataclass
class StepRun:
    """What the step loop drives (train() builds it)."""
    t: object
    state: TrainState
    step_fn: Callable
    feed: InputFeed
    window: StepWindow
    checkpoint: tf.train.Checkpoint
    manager: tf.train.CheckpointManager
    stop: StopRequest
    strategy: tf.distribute.Strategy
    workers: int
    validation: Validation | None = None     # train.eval_every (validation.py)
    checkpoint_dir: str = ""


def _run_steps(run: StepRun, resumed_from: int, fault_at_step: int | None) -> float:
    """Steps resumed_from + 1 .. train.train_steps; returns the last fetched loss. The input
    position (global batches read) is the step plus the batches rollbacks skipped; tickets are
    released up to the next checkpoint's position, so its input state is exact."""
    t, state, feed, window = run.t, run.state, run.feed, run.window
    loss = _value(state.last_loss)  # a run resumed at its last step trains no step
    step = resumed_from  # every call of step_fn adds exactly 1 to state.step (applied or skipped)
    skipped = _value(state.skipped_batches)
    released, rollbacks_to = step + skipped, collections.Counter()
    while step < t.train_steps:
        wanted = next_checkpoint_step(step, t) + skipped   # input up to the checkpoint
        if wanted > released:
            feed.release(wanted - released)
            released = wanted
        step += 1
        window.add(step, run.step_fn(feed.iterator))   # tensors: the host does not wait here
        checkpoint_now = step % t.checkpoint_every == 0 or step == t.train_steps
        stopping = agreed_stop(run.stop, run.strategy, run.workers)
        validate = run.validation is not None and run.validation.due(step)
        if checkpoint_now or stopping or validate or step % t.log_every == 0:
            loss = window.settle()                     # the one host sync of the window
        if window.rollback:
            step, skipped = _roll_back(run, step, skipped, rollbacks_to)
            continue
        if validate:   # settled, not rolled back: before the checkpoint, which holds its best
            run.validation.run(run.checkpoint.model, state, step, window.step_log.emit,
                               run.checkpoint_dir)
        if checkpoint_now or stopping:
            state.last_loss.assign(loss)
            window.step_log.save_history(run.checkpoint_dir, step)   # the curves up to it
            run.manager.save(checkpoint_number=step)
        if checkpoint_now:
            feed.save(step, run.manager.checkpoints, position=step + skipped)
            pause_if_set(PAUSE_AFTER_CHECKPOINT)
        elif stopping:   # the input ran ahead to the next checkpoint step: rebuild its state
            feed.save_between(step, step + skipped, run.manager.checkpoints)
        if stopping:
            raise _preempted(run, step)
        if fault_at_step is not None and step == fault_at_step:
            raise InjectedFault(f"fault injected after step {step}")
    return loss


# Fault-injection seam (tests/e2e/test_bad_input.py, kill -9): set, the run holds still for that
# many seconds after each checkpoint (its input state saved): it is known to be training.
PAUSE_AFTER_CHECKPOINT = "BIGTRAIN_TEST_PAUSE_AFTER_CHECKPOINT_S"


def _preempted(run: StepRun, step: int) -> TrainingPreempted:
    signalled = (f"{run.stop.signal_name}, written {run.stop.since():.1f} s after the signal"
                 if run.stop.requested else "a signal to another worker of the job")
    _log("preempted at step %d: checkpoint %s (%s)", step, run.manager.latest_checkpoint, signalled)
    return TrainingPreempted(
        f"training preempted at step {step} of {run.t.train_steps}: checkpoint "
        f"{run.manager.latest_checkpoint} with its input state ({signalled}); run again to "
        f"resume from it")


def _roll_back(run: StepRun, step: int, skipped: int, rollbacks_to: collections.Counter
               ) -> tuple[int, int]:
    """train.spike_rollback: restore the last checkpoint, on disk (written every
    checkpoint_every steps anyway; a copy in memory would hold the weights and both AdamW
    moments, 3x the model, for an event that is rare) and always good (the window is judged
    before each save). The batches read since it are skipped: the input reads on. Returns the
    (step, skipped batches) to go on from."""
    state, reason = run.state, run.window.rollback
    rollbacks = _value(state.rollbacks) + 1
    run.checkpoint.restore(run.manager.latest_checkpoint).assert_existing_objects_matched()
    back_to = _value(state.step)
    rollbacks_to[back_to] += 1
    if rollbacks_to[back_to] >= MAX_ROLLBACKS_TO_ONE_CHECKPOINT:
        raise TrainingDiverged(
            f"{reason}: rolled back to the checkpoint of step {back_to} "
            f"{rollbacks_to[back_to]} times, skipping the batches after it each time; the run "
            f"diverges whatever the data: lower train.learning_rate ({run.t.learning_rate:g})")
    skipped += step - back_to
    state.rollbacks.assign(rollbacks)
    state.skipped_batches.assign(skipped)
    LOGGER.warning("%s: spike rollback %d to the checkpoint of step %d; the %d batches read "
                   "since are skipped (%d in all)", reason, rollbacks, back_to, step - back_to,
                   skipped)
    return back_to, skipped


def _restore_or_start(checkpoint, checkpoint_dir: str, shared_checkpoint_dir: str):
    """The CheckpointManager saving into checkpoint_dir, after restoring the latest checkpoint of
    shared_checkpoint_dir (the chief's, on every worker) when there is one; a worker with its own
    --out folder (no shared file system) finds its own copy in checkpoint_dir (every worker writes
    each checkpoint, so such a worker resumes at the chief's step instead of step 0)."""
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=3,
                                         checkpoint_name=checkpoints.CHECKPOINT_NAME)
    latest = (tf.train.latest_checkpoint(shared_checkpoint_dir)
              or (checkpoint_dir != shared_checkpoint_dir
                  and tf.train.latest_checkpoint(checkpoint_dir)) or None)
    if latest:
        checkpoint.restore(latest).assert_existing_objects_matched()
        _log("resumed from %s (step %d)", latest, _value(checkpoint.state.step))
    return manager


def _check_memory(config, replicas: int) -> float:
    """The device memory per replica, after the estimate is checked against it: before any
    variable or op exists (a model for data.seq_len=1000000 would die inside TensorFlow, out of
    memory building it, before a check after the build could speak)."""
    device_memory = memory.device_memory_bytes(config.runtime, replicas)
    memory.check(config, memory.estimate(config, memory.analytic_parameters(config), replicas,
                                         device_memory), replicas)
    return device_memory


def train(config, train_files, model_run_dir: str, checkpoint_dir: str, *,
          fault_at_step: int | None = None, strategy: tf.distribute.Strategy | None = None,
          on_step: Callable[[int, float], None] | None = None,
          prepare_model: Callable[[keras.Model], None] | None = None,
          validation: Validation | None = None, trackers=None) -> TrainResult:
    """`prepare_model(model)` runs on the built model before the optimizer exists (warm start,
    freezing: warm_start.py); a resume checkpoint restored later wins. `validation`: validation.py
    (keep_best: the model returned holds the best validation's weights); `trackers`: StepLog's."""
    data, t, runtime = config.data, config.train, config.runtime
    keras.utils.set_random_seed(t.seed)
    strategy = strategy or make_strategy(runtime)
    replicas = strategy.num_replicas_in_sync
    if t.global_batch_size % (replicas * t.accumulation_steps):
        raise ValueError(f"train.global_batch_size ({t.global_batch_size}) is not divisible by "
                         f"{replicas} replicas x {t.accumulation_steps} accumulation steps")
    device_memory = _check_memory(config, replicas)
    model, state, optimizer, schedule = build_training(config, strategy, prepare_model)
    chief, shared_checkpoint_dir = is_chief(strategy), checkpoint_dir
    if not chief:
        checkpoint_dir, model_run_dir = _worker_dirs(strategy, checkpoint_dir, model_run_dir)
    n_params, flops, xla = _describe_and_check(config, model, replicas, device_memory)

    # Restore first: the input opens at the checkpointed step (its saved state, or reading on).
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, state=state)
    manager = _restore_or_start(checkpoint, checkpoint_dir, shared_checkpoint_dir)
    resumed_from = _value(state.step)
    if t.spike_rollback and manager.latest_checkpoint is None:
        manager.save(checkpoint_number=resumed_from)   # a spike before the first save rolls back here
    step_fn = make_train_step(model, optimizer, strategy, state,
                              global_batch_size=t.global_batch_size,
                              accumulation_steps=t.accumulation_steps, clip_norm=t.clip_norm,
                              dynamic_loss_scale=runtime.precision == "mixed_float16",
                              seed=t.seed, xla=xla, pad_id=token_spec(data).pad_id,
                              gradient_fn=pipeline_gradient_fn(config, model, state))
    step_log = StepLog(config, schedule, state, model_run_dir,
                       peak_flops=runtime.peak_tflops_per_device * 1e12 * replicas,
                       flops_per_token=flops, trackers=trackers)
    step_log.resume(checkpoint_dir, resumed_from)   # the curves so far, from step 1
    started, window = time.perf_counter(), StepWindow(t, state, step_log, on_step)
    with StopRequest() as stop, InputFeed(
            strategy, train_files, config, checkpoint_dir, resumed_from,
            start_position=resumed_from + _value(state.skipped_batches)) as feed:
        run = StepRun(t, state, step_fn, feed, window, checkpoint, manager, stop, strategy,
                      workers=worker_count(strategy), validation=validation,
                      checkpoint_dir=checkpoint_dir)
        try:
            loss = _run_steps(run, resumed_from, fault_at_step)
        finally:
            step_log.writer.flush()
    kept = validation.restore_best(model, state, checkpoint_dir) if validation else None
    elapsed, tokens_per_step = time.perf_counter() - started, step_log.tokens_per_step
    return TrainResult(
        model=model, steps=_value(state.step), resumed_from_step=resumed_from,
        skipped_steps=_value(state.skipped_steps), final_loss=loss,
        tokens_seen=_value(state.step) * tokens_per_step,
        tokens_per_second=(t.train_steps - resumed_from) * tokens_per_step / max(elapsed, 1e-9),
        parameter_count=n_params, flops_per_token=flops, num_replicas=replicas,
        loss_scale=_value(state.loss_scale), is_chief=chief,
        rollbacks=_value(state.rollbacks), skipped_batches=_value(state.skipped_batches),
        validation=summary_figures(validation, state, kept))


def evaluate(model: keras.Model, eval_files, seq_len: int, batch_size: int,
             max_batches: int, *, tokenizer) -> dict:
    """Metrics of the in-memory model (the Evaluator measures the exported SavedModel), on
    examples encoded with tokenizer."""
    from components.metrics.lm import evaluate_logits_fn
    return evaluate_logits_fn(lambda ids: model(ids, training=False), eval_files, seq_len,
                              batch_size, max_batches, tokenizer=tokenizer)


def unigram_baseline(train_files, eval_files, seq_len: int, eval_sequences: int, *,
                     vocab_size: int, pad_id: int, train_sequences: int = 20000) -> float:
    """Cross-entropy (nats/token) of a byte-unigram model fit on train (add-one smoothed), scored
    on the evaluation sample (metrics.eval_sample, eval_sequences = eval.batch_size x
    eval.max_batches, 0 = all): the sequences the Trainer's eval, the Evaluator and the variants
    measure. The loss a model that ignores context would reach; training must get clearly below
    it. The fit reads the first train_sequences train sequences (a fit, not a measurement: any
    large enough slice of train will do, and a spread sample would cost a pass over train)."""
    from schemas import FEATURE
    from components.metrics.lm import eval_sample

    def bincount(targets) -> np.ndarray:
        counts = np.bincount(np.asarray(targets).ravel(), minlength=vocab_size)[:vocab_size]
        counts = counts.astype(np.float64)
        counts[pad_id] = 0
        return counts

    # The last partial batch included: a train split smaller than one batch still counts.
    names = sorted(f for p in ([train_files] if isinstance(train_files, str) else train_files)
                   for f in tf.io.gfile.glob(p))
    spec = {FEATURE: tf.io.FixedLenFeature([seq_len + 1], tf.int64)}
    train_counts = np.zeros(vocab_size, np.float64)
    for targets in (tf.data.TFRecordDataset(names, compression_type="GZIP").take(train_sequences)
                    .batch(256).map(lambda s: tf.io.parse_example(s, spec)[FEATURE][:, 1:])):
        train_counts += bincount(targets.numpy())
    eval_counts = bincount(eval_sample(eval_files, seq_len, eval_sequences)[:, 1:])
    if eval_counts.sum() == 0:
        raise ValueError(f"unigram baseline: the eval split {eval_files!r} holds no target tokens")
    probs = (train_counts + 1.0) / (train_counts.sum() + vocab_size)
    return float(-(eval_counts * np.log(probs)).sum() / eval_counts.sum())
