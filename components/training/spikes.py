"""Loss and gradient-norm spikes: a step whose value exceeds FACTOR x the running mean of the
steps before it gets a one-line warning in the training log (step, value, mean). With
train.spike_rollback, a loss spike by LossSpikeRule (a multiple of the running median) is acted
on: the loop restores the last checkpoint and skips the batches since (window.py, loop.py).

The running mean is exponential (weight 1 - DECAY = 0.1 per step: about the last 10 steps) and
judges nothing until it has seen WARMUP_STEPS finite values, so the fast early drop of the loss
and the first steps' gradient norms are not warned about. A spike is folded into the mean like
any step (a lasting jump to a higher level warns for a few steps, not forever). The mean starts
afresh after a resume (it is a diagnostic, not training state). Non-finite steps are left to the
skipped-step log.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import statistics

FACTORS = {"loss": 1.5, "grad-norm": 4.0}
DECAY = 0.9
WARMUP_STEPS = 10

LOGGER = logging.getLogger("bigtrain.train")


def is_spike(value: float, mean: float, factor: float) -> bool:
    """The rule: value > factor x mean (a positive mean; values are losses and norms)."""
    return mean > 0 and value > factor * mean


@dataclasses.dataclass
class RunningMean:
    value: float = 0.0
    count: int = 0

    def update(self, x: float) -> None:
        self.value = x if self.count == 0 else DECAY * self.value + (1.0 - DECAY) * x
        self.count += 1


class SpikeMonitor:
    """observe(step, loss, grad_norm) for every finite step, in order; returns the spike lines
    it logged (for tests), e.g. "step 120: loss spike 7.31 (running mean 2.88, x1.5 threshold)"."""

    def __init__(self, factors: dict | None = None):
        self.factors = dict(FACTORS if factors is None else factors)
        self.means = {name: RunningMean() for name in self.factors}

    def observe(self, step: int, loss: float, grad_norm: float) -> list[str]:
        lines = []
        for name, value in (("loss", loss), ("grad-norm", grad_norm)):
            mean = self.means[name]
            if not math.isfinite(value):
                continue
            if mean.count >= WARMUP_STEPS and is_spike(value, mean.value, self.factors[name]):
                lines.append(f"step {step}: {name} spike {value:.4g} (running mean "
                             f"{mean.value:.4g}, x{self.factors[name]:g} threshold)")
                LOGGER.warning("%s", lines[-1])
            mean.update(value)
        return lines


# A run that rolls back to the same checkpoint this many times is diverging, not unlucky: the
# batches after it have been skipped each time, so the data is not what goes wrong.
MAX_ROLLBACKS_TO_ONE_CHECKPOINT = 3


class LossSpikeRule:
    """train.spike_rollback's rule: a finite loss above train.spike_factor x the median of the
    last train.spike_window finite, non-spike losses. The median, unlike the mean, is not pulled
    up by the spike it judges or by the one before; nothing is judged until the window is full
    (the fast early drop of the loss only lowers the median). A spike is not added to the window.
    The window starts afresh after a resume, like SpikeMonitor's mean."""

    def __init__(self, factor: float, window: int):
        self.factor, self.recent = factor, collections.deque(maxlen=window)

    def judge(self, step: int, loss: float) -> str:
        """'' for a normal loss (added to the window); for a spike, the reason, e.g. "step 120:
        loss 41.2 > 3 x 2.88, the median of the last 50 steps"."""
        if not math.isfinite(loss):
            return ""
        if len(self.recent) == self.recent.maxlen:
            median = statistics.median(self.recent)
            if loss > self.factor * median:
                return (f"step {step}: loss {loss:.4g} > {self.factor:g} x {median:.4g}, the "
                        f"median of the last {len(self.recent)} steps")
        self.recent.append(loss)
        return ""
