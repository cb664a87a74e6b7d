"""Loss-spike rollback (train.spike_rollback): a poisoned step (the weights blown up just before
step 10, as a bad batch's update would) gives a loss far above 3 x the running median; the loop
restores the checkpoint of step 8 (on disk), skips the batches read since, and ends within 0.05
nats (eval loss) of a run that never saw the poison, with one rollback and 2 skipped batches
counted. With rollback off the same poison leaves the model far worse (the mutation the rule
must catch). A run crashed after the rollback and resumed, from its saved input state or by
reading forward, ends with the uninterrupted rollback run's weights (the input state and the
skipped-batch count are checkpointed)."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

from components.tokenizer.byte_level import ByteTokenizer
from components.training import loop
from tests.training.conftest import SEQ_LEN, tiny_config
from tests.support.numerics import max_difference

POISONED_STEP = 10
ROLLBACK = ("train.train_steps=16", "train.checkpoint_every=4", "train.log_every=1",
            "train.spike_rollback=true", "train.spike_window=3", "train.spike_factor=3")
TOLERANCE_NATS = 0.05


def poisoning(monkeypatch, at_call: int | tuple[int, ...] | None, factor: float = 8.0):
    """loop.make_train_step whose step number `at_call` (of this process; or each of several)
    first multiplies every weight by `factor` (8: a finite loss many times the median, and
    weights a few steps cannot repair; NaN: every later step non-finite)."""
    real_make = loop.make_train_step
    at_calls = at_call if isinstance(at_call, tuple) else (at_call,)

    def make(model, *args, **kwargs):
        step_fn, calls = real_make(model, *args, **kwargs), [0]

        def poisoned(iterator):
            calls[0] += 1
            if calls[0] in at_calls:
                for variable in model.trainable_variables:
                    variable.assign(variable * factor)
            return step_fn(iterator)
        return poisoned
    monkeypatch.setattr(loop, "make_train_step", make)


def run(tmp_path, shards, name, *overrides, **kwargs):
    return loop.train(tiny_config(*ROLLBACK, *overrides), shards["train"],
                      str(tmp_path / name / "run"), str(tmp_path / name / "ckpt"), **kwargs)


def eval_loss(result, shards) -> float:
    return loop.evaluate(result.model, shards["eval"], SEQ_LEN, 16, 4,
                         tokenizer=ByteTokenizer())["loss"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, shards):
    return run(tmp_path_factory.mktemp("clean"), shards, "clean")


class _Warnings(logging.Handler):
    """The bigtrain.train warnings of one run, as caplog.at_level(WARNING) would collect them
    (caplog is per test; this run is shared by the module)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def rolled(tmp_path_factory, shards):
    """The poisoned run with rollback on, uninterrupted, and its warnings: checked by the first
    test and the reference of both resume cases (each ran this same run before)."""
    logger, warnings = logging.getLogger("bigtrain.train"), _Warnings()
    level = logger.level
    logger.addHandler(warnings)
    logger.setLevel(logging.WARNING)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            poisoning(monkeypatch, POISONED_STEP)
            result = run(tmp_path_factory.mktemp("rolled"), shards, "rolled")
    finally:
        logger.removeHandler(warnings)
        logger.setLevel(level)
    return result, "\n".join(warnings.messages)


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_a_poisoned_step_is_rolled_back_and_the_run_recovers(clean, rolled, shards):
    rolled, log = rolled
    assert clean.rollbacks == 0 and clean.skipped_batches == 0   # no false alarm
    assert rolled.rollbacks == 1 and rolled.skipped_batches == POISONED_STEP - 8
    assert rolled.steps == 16
    assert (f"step {POISONED_STEP}: loss" in log
            and "spike rollback 1 to the checkpoint of step 8; the 2 batches" in log)
    assert abs(eval_loss(rolled, shards) - eval_loss(clean, shards)) <= TOLERANCE_NATS


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_without_rollback_the_poison_ruins_the_run(clean, shards, tmp_path, monkeypatch):
    """The mutation: rollback off, same poison: the model ends far from the clean run."""
    poisoning(monkeypatch, POISONED_STEP)
    ruined = run(tmp_path, shards, "ruined", "train.spike_rollback=false")
    assert ruined.rollbacks == 0
    assert eval_loss(ruined, shards) - eval_loss(clean, shards) > 10 * TOLERANCE_NATS


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-27): out of the fast tier
def test_non_finite_steps_up_to_the_limit_roll_back_instead_of_ending_the_run(shards, tmp_path,
                                                                             monkeypatch):
    """NaN weights before step 6: steps 6 and 7 are skipped (non-finite), the limit of 2 in a
    row is reached at 7: back to step 4, batches 5-7 skipped. Rollback off: TrainingDiverged."""
    poisoning(monkeypatch, 6, factor=float("nan"))
    limit = ("train.train_steps=10", "train.max_consecutive_skipped=2")
    rolled = run(tmp_path, shards, "nan", *limit)
    assert (rolled.rollbacks, rolled.skipped_batches, rolled.steps) == (1, 3, 10)
    assert np.isfinite(rolled.final_loss)
    assert all(np.isfinite(w).all() for w in rolled.model.get_weights())
    poisoning(monkeypatch, 6, factor=float("nan"))
    with pytest.raises(loop.TrainingDiverged, match="steps 6-7: 2 steps in a row"):
        run(tmp_path, shards, "nan_off", *limit, "train.spike_rollback=false")


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_the_third_rollback_to_one_checkpoint_ends_the_run(shards, tmp_path, monkeypatch,
                                                            caplog):
    """NaN weights before step call 6 and before each retry of step 5 (calls 8 and 10): each
    time two steps in a row are non-finite (the limit, 2) and the loop rolls back to the
    checkpoint of step 4. Rollbacks 1 and 2 are taken; the third to the same checkpoint is
    TrainingDiverged (3, counted by hand: calls 6-7, 8-9, 10-11), not a fourth try."""
    poisoning(monkeypatch, (6, 8, 10), factor=float("nan"))
    with caplog.at_level(logging.WARNING, logger="bigtrain.train"), pytest.raises(
            loop.TrainingDiverged, match="rolled back to the checkpoint of step 4 3 times"):
        run(tmp_path, shards, "diverging", "train.train_steps=10",
            "train.max_consecutive_skipped=2")
    rollbacks = [r.getMessage() for r in caplog.records if "spike rollback" in r.getMessage()]
    assert [m.split(":")[-1].split(";")[0].strip() for m in rollbacks] == [
        "spike rollback 1 to the checkpoint of step 4", "spike rollback 2 to the checkpoint of step 4"]


@pytest.mark.slow   # two trainings per case (the uninterrupted one is the module's `rolled`)
@pytest.mark.parametrize("input_state", ["restored", "read forward"])
def test_resume_after_a_rollback_is_exact(rolled, shards, tmp_path, monkeypatch, input_state):
    straight, _ = rolled   # the same poisoned run, uninterrupted
    poisoning(monkeypatch, POISONED_STEP)
    with pytest.raises(loop.InjectedFault):
        run(tmp_path, shards, "crashy", fault_at_step=12)   # after the rollback, at ckpt 12
    if input_state == "read forward":   # no saved state: the skipped batches must be read too
        for folder in (tmp_path / "crashy" / "ckpt").glob("input-*"):
            shutil.rmtree(folder)
    poisoning(monkeypatch, None)
    resumed = run(tmp_path, shards, "crashy")
    assert resumed.resumed_from_step == 12 and resumed.rollbacks == 1
    assert resumed.skipped_batches == 2
    assert max_difference(resumed, straight) <= 1e-6
