"""The Tuner's artifacts' MLMD property names (TunerResults and the best HyperParameters), the one
place that spells them: components/tuner/component.py writes them, the run report
(components/tuner/summary.py) and `bigtrain lineage` read them. The best HyperParameters also
hold each tuned value under its own hyperparameter name."""

from __future__ import annotations

OBJECTIVE, ALGORITHM = "objective", "algorithm"
TRIALS, TRIALS_COMPLETED, BEST_TRIAL = "trials", "trials_completed", "best_trial"
TRIALS_JSON = "trials_json"   # TunerResults: every trial's record, JSON


def best(objective: str) -> str:
    """`best_<objective>`: the winning trial's objective value."""
    return f"best_{objective}"


def trial_property(trial_id: str, field: str) -> str:
    """`trial_<id>.<field>`: one trial's status, objective or hyperparameter value."""
    return f"trial_{trial_id}.{field}"


PROPERTIES = frozenset((OBJECTIVE, ALGORITHM, TRIALS, TRIALS_COMPLETED, BEST_TRIAL, TRIALS_JSON))
PATTERNS = (r"best_[a-z0-9_]+", r"trial_[^.]+\.[a-z0-9_]+")
