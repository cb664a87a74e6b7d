"""Validation while training (train.eval_every) and keep-best (train.keep_best).

Every train.eval_every steps (at steps that are multiples of it, so a resumed run validates at the
same steps as an uninterrupted one) the in-memory model is scored on one fixed slice of the eval
split: the head of the evaluation sample (components/metrics/lm.py eval_sample: the
train.eval_batches x eval.batch_size sequences with the smallest keys), the same sequences every
time and in every run on the same Examples. It is read as the head of the final evaluation's
sample (eval.batch_size x eval.max_batches, cached per process), so the split is read once for
both (issue 58). Its loss and bits per byte go to the console, to
TensorBoard beside the training loss (`validation_loss`, `validation_bits_per_byte`: the UI's
curves page draws them) and to the training summary. A non-finite validation loss stops the run
(NonFiniteError naming the step), before any later checkpoint.

keep_best: when a validation beats every earlier one, the weights are written to
`<checkpoint dir>/best-<step>` (the previous best removed) and the best loss and step go into the
training checkpoint's TrainState, so a resumed run knows them; at the end the model takes the best
weights back before it is evaluated and exported. Ties keep the earlier step.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import tensorflow as tf

from components.model import properties as model_props
from components.common.figures import require_finite

LOGGER = logging.getLogger("bigtrain.train")
BEST_PREFIX = "best-"


def _value(variable):
    return variable.read_value().numpy().item()


@dataclasses.dataclass
class Validation:
    """What train() needs to validate: the eval files, their tokenizer and the settings."""
    eval_files: list
    tokenizer: object
    every: int                 # train.eval_every (0 = off)
    batches: int               # train.eval_batches
    batch_size: int            # eval.batch_size
    seq_len: int
    keep_best: bool = False
    # The final evaluation's sample size (eval.batch_size x eval.max_batches): the slice is read as
    # its head, so the split is read once for both (metrics.sample_head).
    head_of: int = 0
    history: list = dataclasses.field(default_factory=list)   # (step, loss, bits/byte), this run

    @classmethod
    def from_config(cls, config, eval_files, tokenizer) -> "Validation | None":
        t = config.train
        if t.eval_every <= 0:
            return None
        from components.metrics.lm import sample_size
        return cls(list(eval_files), tokenizer, t.eval_every, t.eval_batches,
                   config.eval.batch_size, config.data.seq_len, t.keep_best,
                   head_of=sample_size(config.eval))

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def run(self, model, state, step: int, emit, checkpoint_dir: str) -> float:
        """Score the slice at `step`; log it (emit: window.py StepLog.emit, TensorBoard and the
        trackers), and with keep_best save a new best."""
        from components.metrics.lm import evaluate_logits_fn
        metrics = evaluate_logits_fn(lambda ids: model(ids, training=False), self.eval_files,
                                     self.seq_len, self.batch_size, self.batches,
                                     tokenizer=self.tokenizer, head_of=self.head_of)
        loss = require_finite("Trainer", f"the validation loss at step {step}", metrics["loss"],
                              "training diverged: lower train.learning_rate or look for a bad batch")
        self.history.append((step, loss, metrics["bits_per_byte"]))
        LOGGER.info("step %d  validation loss %.4f  %.4f bits/byte (%d eval sequences)", step,
                    loss, metrics["bits_per_byte"], metrics["sample_sequences"])
        emit(step, {"validation_loss": loss, "validation_bits_per_byte": metrics["bits_per_byte"]})
        if loss < _value(state.best_validation_loss):
            previous = _value(state.best_validation_step)
            state.best_validation_loss.assign(loss)
            state.best_validation_step.assign(step)
            if self.keep_best:
                tf.train.Checkpoint(model=model).write(best_path(checkpoint_dir, step))
                if previous and previous != step:
                    for name in tf.io.gfile.glob(best_path(checkpoint_dir, previous) + "*"):
                        tf.io.gfile.remove(name)
        return loss

    def restore_best(self, model, state, checkpoint_dir: str) -> int | None:
        """keep_best: load the best weights into model; the best step, or None without one."""
        step = _value(state.best_validation_step)
        if not self.keep_best or not step:
            return None
        tf.train.Checkpoint(model=model).read(best_path(checkpoint_dir, step)) \
            .assert_existing_objects_matched()
        LOGGER.info("train.keep_best: the model of step %d (validation loss %.4f) is exported",
                    step, _value(state.best_validation_loss))
        return step


def best_path(checkpoint_dir: str, step: int) -> str:
    return os.path.join(checkpoint_dir, f"{BEST_PREFIX}{step}")


def summary_figures(validation: "Validation | None", state, kept_step: int | None) -> dict:
    """The training summary's validation figures (MLMD properties of the Model)."""
    if validation is None:
        return {}
    figures = {model_props.VALIDATION_EVERY: validation.every}
    if validation.history:
        step, loss, bpb = validation.history[-1]
        figures.update({model_props.VALIDATION_LOSS: loss, model_props.VALIDATION_BITS_PER_BYTE: bpb,
                        model_props.VALIDATION_STEP: step})
    best = _value(state.best_validation_step)
    if best:
        figures.update({model_props.BEST_VALIDATION_LOSS: _value(state.best_validation_loss),
                        model_props.BEST_VALIDATION_STEP: best})
    if kept_step is not None:
        figures[model_props.KEPT_BEST_STEP] = kept_step
    return figures
