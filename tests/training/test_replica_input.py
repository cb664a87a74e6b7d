"""The training loop fetches step results from the device once per log window (issue 20 item 1).
Which rows each replica gets, and resume: test_input_streams.py, test_feed.py.

Mutations these catch: a loop that syncs the host every step (the settle count; a per-step
float(loss) or bool(finite): the host-read count); a divergence check that no longer fires within
the window."""

import numpy as np
import pytest

from components.training import loop, train_step
from tests.training.conftest import tiny_config


@pytest.fixture(scope="module")
def counted(shards, tmp_path_factory):
    """One 8-step run (log every 4, checkpoint at 6) with both counters below installed: the
    pending steps at each settle, and every host read of an eager tensor (float(), bool(),
    int(), .numpy(), np.asarray: all go through EagerTensor._numpy) with the number of steps run
    so far. Returns (result, settles, losses, steps run, reads)."""
    from tensorflow.python.framework import ops
    settles, losses, steps_run, reads = [], [], [0], []
    real_settle, real_make = loop.StepWindow.settle, loop.make_train_step
    real_numpy = ops._EagerTensorBase._numpy

    def counting_make(*args, **kwargs):
        step = real_make(*args, **kwargs)

        def counted_step(iterator):
            results = step(iterator)
            steps_run[0] += 1
            return results
        return counted_step
    tmp_path = tmp_path_factory.mktemp("counted")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(loop.StepWindow, "settle",
                            lambda self: settles.append(len(self.pending)) or real_settle(self))
        monkeypatch.setattr(loop, "make_train_step", counting_make)
        monkeypatch.setattr(ops._EagerTensorBase, "_numpy",
                            lambda self: reads.append(steps_run[0]) or real_numpy(self))
        config = tiny_config("train.train_steps=8", "train.log_every=4", "train.checkpoint_every=6")
        result = loop.train(config, shards["train"], str(tmp_path / "run"), str(tmp_path / "ckpt"),
                            on_step=lambda step, loss: losses.append((step, loss)))
    return result, settles, losses, steps_run[0], reads


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_losses_are_fetched_once_per_log_window(counted):
    result, settles, losses, _, _ = counted
    assert settles == [4, 2, 2]                   # steps 1-4 (log), 5-6 (checkpoint), 7-8 (end)
    assert [s for s, _ in losses] == list(range(1, 9))
    assert losses[-1][1] == pytest.approx(result.final_loss)
    assert all(np.isfinite(loss) for _, loss in losses)


def test_the_host_reads_no_tensor_between_log_windows(counted):
    """Reads may happen only at a window's fetch (after steps 4, 6, 8) or before the first step
    (the run of `counted`, whose on_step gets the fetched losses); the settle count above misses a
    loop that adds `float(loss)` or `bool(finite)` after every step, this does not (reads after
    steps 1, 2, 3, 5, 7)."""
    _, _, _, steps_run, reads = counted
    assert steps_run == 8 and {4, 6, 8} <= set(reads)
    assert set(reads) <= {0, 4, 6, 8}


@pytest.mark.slow   # >= 5 CPU-s alone (the ledger, 2026-11-28): out of the fast tier
def test_divergence_fires_within_the_log_window(shards, tmp_path, monkeypatch):
    """Every step skipped, limit 3, log_every 4: the error names steps 1-3 and fires at the
    window's fetch after step 4, at most log_every - 1 steps late."""
    monkeypatch.setattr(train_step, "unscale", lambda grads, scale: [g * np.inf for g in grads])
    calls = []
    real_make = loop.make_train_step

    def counting_make(*args, **kwargs):
        step = real_make(*args, **kwargs)
        return lambda iterator: calls.append(1) or step(iterator)
    monkeypatch.setattr(loop, "make_train_step", counting_make)
    config = tiny_config("train.train_steps=10", "train.max_consecutive_skipped=3",
                         "train.log_every=4")
    with pytest.raises(loop.TrainingDiverged, match=r"steps 1-3: 3 steps in a row"):
        loop.train(config, shards["train"], str(tmp_path / "run"), str(tmp_path / "ckpt"))
    assert len(calls) == 4
