"""The steps since the last host sync (StepWindow): their results fetched at once, skipped steps
and spikes judged step by step, and the log line and TensorBoard scalars of each log window
(StepLog). Split from loop.py, which drives them."""

from __future__ import annotations

import logging
import os
import time

import tensorflow as tf

from components.storage import checkpoints, fs
from components.training.spikes import LossSpikeRule, SpikeMonitor

LOGGER = logging.getLogger("bigtrain.train")


class TrainingDiverged(RuntimeError):
    """train.max_consecutive_skipped steps in a row had non-finite gradients."""


def _value(variable):
    """A (possibly mirrored) scalar variable as a Python number."""
    return variable.read_value().numpy().item()


def _log(message: str, *args) -> None:
    LOGGER.info(message, *args)


class StepLog:
    """Every train.log_every steps (and the last): one log line and the TensorBoard scalars of the
    window since the previous line (throughput, learning rate, gradient norm, loss scale)."""

    def __init__(self, config, schedule, state, model_run_dir: str, peak_flops: float = 0.0,
                 flops_per_token: float = 0.0, trackers=None):
        """peak_flops: FLOP/s of all devices together (0: unknown, no MFU scalar). trackers:
        components/tracking's fan-out, given each window's figures too (None: TensorBoard only;
        without tensorboard in its backends, no event files)."""
        self.train, self.schedule, self.state = config.train, schedule, state
        self.tokens_per_step = config.train.global_batch_size * config.data.seq_len
        self.peak_flops, self.flops_per_token = peak_flops, flops_per_token
        self.trackers = trackers
        self.log_dir = model_run_dir
        self.writer = (tf.summary.create_file_writer(os.path.join(model_run_dir, "train"))
                       if trackers is None or trackers.tensorboard
                       else tf.summary.create_noop_writer())
        self.window_start, self.window_steps = time.perf_counter(), 0
        self.history: dict[int, dict] = {}   # step -> figures: this training's, from step 1

    def step(self, step: int, loss: float, grad_norm) -> None:
        t = self.train
        self.window_steps += 1
        if step % t.log_every and step != t.train_steps:
            return
        elapsed = time.perf_counter() - self.window_start
        tokens_per_s = self.window_steps * self.tokens_per_step / max(elapsed, 1e-9)
        lr = float(self.schedule(step - 1))                      # the rate this step used
        eta = (t.train_steps - step) * elapsed / max(self.window_steps, 1)
        _log("step %d/%d  loss %.4f  lr %.2e  grad-norm %.3f  %.0f tokens/s  ETA %.0fs",
             step, t.train_steps, loss, lr, float(grad_norm), tokens_per_s, eta)
        figures = {"loss": loss, "learning_rate": lr, "tokens_per_second": tokens_per_s,
                   "gradient_norm": float(grad_norm), "loss_scale": _value(self.state.loss_scale),
                   "skipped_steps": _value(self.state.skipped_steps)}
        if self.peak_flops and self.flops_per_token:
            figures["mfu"] = tokens_per_s * self.flops_per_token / self.peak_flops
        self.emit(step, figures)
        self.window_start, self.window_steps = time.perf_counter(), 0

    def emit(self, step: int, figures: dict, tensorboard: bool = True) -> None:
        """TensorBoard scalars of `figures` at `step`, and the same to the trackers; kept in
        `history` (a step logged again after a spike rollback: the last figures win)."""
        self.history.setdefault(step, {}).update(figures)
        if tensorboard:
            with self.writer.as_default(step=step):
                for name, value in figures.items():
                    tf.summary.scalar(name, value)
        if self.trackers:
            self.trackers.log_step(step, figures)

    def resume(self, checkpoint_dir: str, step: int) -> int:
        """A run resumed at `step`: the figures the earlier run(s) of this training logged up to
        that step (the checkpoint folder's history), first, into this run's TensorBoard events
        (unless they are this same folder's, which already holds them) and trackers, so that its
        curves hold every logged step from step 1 once each."""
        log_dir, points = checkpoints.read_history(checkpoint_dir, step)
        same_folder = fs.absolute(log_dir) == fs.absolute(self.log_dir)
        for logged in sorted(points):
            self.emit(logged, points[logged], tensorboard=not same_folder)
        if points:
            _log("curves: the %d logged steps up to step %d (from %s) carried into %s",
                 len(points), step, log_dir, self.log_dir)

    def save_history(self, checkpoint_dir: str, step: int) -> None:
        """Before the checkpoint of `step`: the figures up to it (a history is never behind its
        checkpoint; one ahead of it, after a failed save, is cut at the restored step)."""
        checkpoints.write_history(checkpoint_dir, self.log_dir,
                                  {s: f for s, f in self.history.items() if s <= step})


def _skipped_step(step: int, loss: float, consecutive: int, state, t, rollback: bool) -> str:
    """Log a step skipped for non-finite gradients. After too many in a row: TrainingDiverged,
    or with train.spike_rollback the reason for a rollback; else ''."""
    _log("step %d: non-finite gradients, step skipped (loss scale now %g, %d skipped)",
         step, _value(state.loss_scale), _value(state.skipped_steps))
    if consecutive < t.max_consecutive_skipped:
        return ""
    what = (f"steps {step - consecutive + 1}-{step}: {consecutive} steps in a row had non-finite "
            f"gradients (loss {loss}, loss scale {_value(state.loss_scale):g})")
    if rollback:
        return f"{what} (limit: train.max_consecutive_skipped={t.max_consecutive_skipped})"
    raise TrainingDiverged(
        f"{what}; the run is diverging: lower "
        f"train.learning_rate ({t.learning_rate:g}) or train.clip_norm, or use "
        f"runtime.precision=mixed_bfloat16 / float32 (limit: "
        f"train.max_consecutive_skipped={t.max_consecutive_skipped})")


class StepWindow:
    """The steps since the last host sync. Their (loss, gradient norm, finite) results stay on the
    device until `settle` (every train.log_every steps, at each checkpoint, a stop and the last
    step) fetches them: then, step by step, skipped steps are logged and counted (TrainingDiverged
    after train.max_consecutive_skipped in a row: raised at most min(log_every, checkpoint_every)
    - 1 steps after the step that reached the limit, and before any later checkpoint is written),
    on_step is called and StepLog writes its line. With train.spike_rollback, a loss spike or that
    many non-finite steps in a row set `rollback` (the reason) instead, and the rest of the
    window is dropped: the loop restores the last checkpoint."""

    def __init__(self, t, state, step_log: StepLog, on_step=None):
        self.t, self.state, self.step_log, self.on_step = t, state, step_log, on_step
        self.pending, self.consecutive_skipped, self.rollback = [], 0, ""
        self.spikes = SpikeMonitor()
        self.loss_rule = LossSpikeRule(t.spike_factor, t.spike_window) if t.spike_rollback else None

    def add(self, step: int, results) -> None:
        self.pending.append((step, *results))

    def settle(self) -> float:
        """Fetch the window's results; returns the last accepted step's loss."""
        fetched = [(step, float(loss), float(norm), bool(finite))
                   for step, loss, norm, finite in self.pending]
        self.pending, self.rollback, last = [], "", None
        for step, loss, norm, finite in fetched:
            self.consecutive_skipped = 0 if finite else self.consecutive_skipped + 1
            if not finite:
                self.rollback = _skipped_step(step, loss, self.consecutive_skipped, self.state,
                                              self.t, rollback=self.loss_rule is not None)
            else:
                self.spikes.observe(step, loss, norm)
                self.rollback = self.loss_rule.judge(step, loss) if self.loss_rule else ""
            if self.rollback:
                self.consecutive_skipped = 0
                return _value(self.state.last_loss) if last is None else last
            if self.on_step:
                self.on_step(step, loss)
            self.step_log.step(step, loss, norm)
            last = loss
        return last
