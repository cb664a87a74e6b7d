"""train.lr_schedule=wsd against a plain-Python reference, and the spike rule on a synthetic
sequence of losses and gradient norms."""

import logging
import math

import pytest

from components.config import build_config
from components.training import spikes
from components.training.optimizer import WarmupCosine, make_schedule


def wsd_reference(step, peak=1.0, floor=0.1, warmup=10, total=100, fraction=0.2):
    """Warmup 10, peak held through step 80, 1 - sqrt down to the floor at step 99."""
    if step < warmup:
        return peak * (step + 1) / warmup
    start = total - round(fraction * total)
    progress = min(max((step - start) / (total - start - 1), 0.0), 1.0)
    return floor + (peak - floor) * (1 - math.sqrt(progress))


def test_wsd_warms_up_holds_the_peak_then_decays_to_the_floor():
    config = build_config("tiny", overrides=[
        "train.lr_schedule=wsd", "train.learning_rate=1.0", "train.min_learning_rate=0.1",
        "train.warmup_steps=10", "train.train_steps=100", "train.decay_fraction=0.2"])
    schedule = make_schedule(config.train)
    lr = [float(schedule(s)) for s in range(100)]
    assert lr == pytest.approx([wsd_reference(s) for s in range(100)], abs=1e-6)
    assert lr[10:81] == pytest.approx([1.0] * 71) and lr[81] < 1.0 and lr[99] == pytest.approx(0.1)
    # A pure function of the step: a schedule rebuilt after a resume gives the same rates.
    again = type(schedule).from_config(schedule.get_config())
    assert [float(again(s)) for s in (0, 50, 85, 99)] == [lr[s] for s in (0, 50, 85, 99)]


def test_wsd_decay_starts_at_the_rounded_fraction_written_out():
    """9 steps, decay_fraction 0.3: 2.7 steps round to the last 3 (steps 6, 7, 8), not 2 (int).
    Written out by hand: warmup 1 step (step 0 at the peak), the peak through step 6, then
    1 - sqrt(progress) with progress 0, 1/2, 1 over steps 6-8."""
    config = build_config("tiny", overrides=[
        "train.lr_schedule=wsd", "train.learning_rate=1.0", "train.min_learning_rate=0.1",
        "train.warmup_steps=1", "train.train_steps=9", "train.decay_fraction=0.3"])
    schedule = make_schedule(config.train)
    expected = [1.0] * 7 + [0.1 + 0.9 * (1 - math.sqrt(0.5)), 0.1]
    assert [float(schedule(s)) for s in range(9)] == pytest.approx(expected, abs=1e-6)


def test_cosine_stays_the_config_default_and_the_tiny_recipe_is_wsd():
    """TrainConfig's default schedule is cosine (old configs keep theirs); the tiny preset (the
    default run) uses the measured recipe's wsd (docs/benchmarks.md, "Recipe")."""
    from components.config import TrainConfig
    assert type(make_schedule(TrainConfig())) is WarmupCosine
    assert type(make_schedule(build_config("tiny").train)) is not WarmupCosine


def test_spikes_are_warned_with_step_value_and_mean(caplog):
    # Steps 1-10: big early values are not judged; step 31: 4.4 < 1.5 x ~3.0 is no spike;
    # step 32: non-finite (the skipped-step log's); steps 33 and 34: a loss and a norm spike.
    losses = [9.0 if step == 2 else 3.0 for step in range(1, 31)] + [4.4, float("nan"), 5.0, 3.0]
    norms = [50.0 if step == 2 else 1.0 for step in range(1, 31)] + [1.0, 1.0, 1.0, 9.0]
    monitor, lines = spikes.SpikeMonitor(), []
    with caplog.at_level(logging.WARNING, logger="bigtrain.train"):
        for step, (loss, norm) in enumerate(zip(losses, norms), start=1):
            lines += monitor.observe(step, loss, norm)
    assert len(lines) == 2
    assert lines[0] == f"step 33: loss spike 5 (running mean {ema(losses[:32]):.4g}, x1.5 threshold)"
    assert lines[1] == f"step 34: grad-norm spike 9 (running mean {ema(norms[:33]):.4g}, x4 threshold)"
    assert [r.getMessage() for r in caplog.records] == lines


def ema(values, decay=0.9):
    """The running mean of the finite values, written out."""
    mean = None
    for v in values:
        if math.isfinite(v):
            mean = v if mean is None else decay * mean + (1 - decay) * v
    return mean


def test_the_rule_is_a_factor_of_the_mean():
    assert spikes.is_spike(3.1, 2.0, 1.5) and not spikes.is_spike(3.0, 2.0, 1.5)
    assert not spikes.is_spike(1.0, 0.0, 1.5)


def test_the_rollback_rule_is_a_factor_of_the_median_of_a_full_window():
    """Median of the last 3 accepted losses; nothing judged before the window is full; a spike
    is not added to the window (the next normal loss is judged against the same median);
    non-finite losses are left to the skipped-step rule."""
    rule = spikes.LossSpikeRule(factor=3.0, window=3)
    assert [rule.judge(step, loss) for step, loss in enumerate([90.0, 2.0, 4.0], 1)] == ["", "", ""]
    assert rule.judge(4, 12.0) == ""                      # 12 = 3 x median(90, 2, 4): no spike
    # the window is now (2, 4, 12): median 4
    assert rule.judge(5, 12.5) == "step 5: loss 12.5 > 3 x 4, the median of the last 3 steps"
    assert rule.judge(6, float("nan")) == "" and rule.judge(7, float("inf")) == ""
    assert rule.judge(8, 12.1) == "step 8: loss 12.1 > 3 x 4, the median of the last 3 steps"
    assert rule.judge(9, 3.0) == ""                       # window (4, 12, 3): median 4
    assert list(rule.recent) == [4.0, 12.0, 3.0]
