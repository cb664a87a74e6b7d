"""The Evaluator's variant rule as plain arithmetic: which batches a variant is measured on, its
paired loss delta and standard error, and its whole-sample figures (the difference estimator).
References are computed independently with numpy from the same per-batch rows."""

import math

import numpy as np
import pytest

from components.config import EvalConfig
from components.evaluation.measure import paired_loss_delta, variant_batch_count, variant_estimate


def rows_from(losses, tokens=100.0, correct=40.0, nbytes=120.0):
    """Per-batch rows [loss sum, correct, tokens, bytes] for per-token mean losses."""
    return [[loss * tokens, correct, tokens, nbytes] for loss in losses]


def test_variant_batch_count_is_the_first_variant_batches_capped_by_max_batches():
    assert variant_batch_count(EvalConfig(max_batches=50, variant_batches=10)) == 10
    assert variant_batch_count(EvalConfig(max_batches=6, variant_batches=10)) == 6
    assert variant_batch_count(EvalConfig(max_batches=50, variant_batches=0)) == 50


def test_paired_delta_and_standard_error_match_numpy():
    """Catches an unpaired delta (variant subset vs the float model's whole sample), a
    population (ddof=0) or per-batch (no 1/sqrt(k)) standard error."""
    rng = np.random.RandomState(0)
    float_losses = 2.0 + rng.normal(0, 0.3, 8)          # batches differ a lot...
    diffs = 0.001 + rng.normal(0, 0.0005, 5)            # ...the paired differences little
    delta, se = paired_loss_delta(rows_from(float_losses), rows_from(float_losses[:5] + diffs))
    assert delta == pytest.approx(diffs.mean(), abs=1e-12)
    assert se == pytest.approx(diffs.std(ddof=1) / math.sqrt(5), rel=1e-9)


def test_paired_delta_is_token_weighted():
    float_rows = [[200.0, 0, 100.0, 100.0], [60.0, 0, 20.0, 20.0]]
    variant_rows = [[210.0, 0, 100.0, 100.0], [60.0, 0, 20.0, 20.0]]
    delta, _ = paired_loss_delta(float_rows, variant_rows)
    assert delta == pytest.approx(10.0 / 120.0)        # (variant - float loss sums) / tokens


def test_one_batch_has_no_standard_error_and_unpaired_batches_are_refused():
    assert paired_loss_delta(rows_from([2.0]), rows_from([2.1]))[1] is None
    with pytest.raises(ValueError, match="not the same eval sequences"):
        paired_loss_delta(rows_from([2.0, 2.0]), rows_from([2.0, 2.0], tokens=99.0))


def test_variant_estimate_is_float_whole_sample_plus_paired_difference():
    float_losses = [1.5, 2.5, 3.0, 2.0]
    float_rows = rows_from(float_losses)
    float_metrics = {"loss": float(np.mean(float_losses)), "accuracy": 0.4,
                     "bits_per_byte": float(np.mean(float_losses)) * 100 / 120 / math.log(2),
                     "examples": 32, "tokens": 400, "batches": float_rows}
    variant_rows = rows_from([1.52, 2.54], correct=38.0)
    measured = {"loss": 2.03, "accuracy": 0.38, "bits_per_byte": 0.0, "tokens": 200,
                "latency_ms": 5.0, "size_bytes": 10, "batches": variant_rows}
    estimate = variant_estimate(float_metrics, measured)
    assert estimate["loss_delta"] == pytest.approx(0.03)
    assert estimate["loss"] == pytest.approx(float_metrics["loss"] + 0.03)
    assert estimate["accuracy"] == pytest.approx(0.4 - 0.02)
    assert estimate["bits_per_byte"] == pytest.approx(float_metrics["bits_per_byte"]
                                                      + 0.03 * 100 / 120 / math.log(2))
    assert estimate["batches"] == 2 and estimate["measured_loss"] == 2.03
    assert estimate["tokens"] == 400 and estimate["size_bytes"] == 10
