"""Tuning and fine-tuning in the run report: plain functions over the artifact properties the
report reads from MLMD (no TensorFlow import)."""

from __future__ import annotations

import json

from components.model import properties as model_props
from components.tuner import properties as names
from components.tuner.space import OBJECTIVE_NAME


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def tuner_line(results: dict) -> str:
    """One line for the Tuner stage: trials, algorithm, best objective and trial."""
    best = results.get(names.best(OBJECTIVE_NAME))
    return (f"{results.get(names.TRIALS_COMPLETED)}/{results.get(names.TRIALS)} trials "
            f"({results.get(names.ALGORITHM)}), best {OBJECTIVE_NAME} {_fmt(best)} "
            f"(trial {results.get(names.BEST_TRIAL)})")


def trials_table(results: dict) -> list[str]:
    """The trials table: one row per trial, its values, steps, seconds and objective."""
    records = json.loads(results.get(names.TRIALS_JSON) or "[]")
    if not records:
        return []
    keys = sorted({k for r in records for k in r["values"]})
    header = ["trial", "status", *keys, "steps", "seconds", OBJECTIVE_NAME]
    rows = [[r["trial_id"] + (" *" if r["trial_id"] == results.get(names.BEST_TRIAL) else ""),
             r["status"].lower(), *[_fmt(r["values"].get(k)) for k in keys],
             _fmt(r.get("steps")), _fmt(r.get("seconds")), _fmt(r.get(OBJECTIVE_NAME))]
            for r in records]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = [f"tuning: {results.get('uri')} (* = best; TensorBoard HParams: "
             f"{results.get('uri')}/tensorboard)"]
    lines += ["  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
              for row in [header] + rows]
    return lines


def model_lineage_note(model: dict) -> str:
    """', fine-tuned from Model #n' / ', tuned' for the Trainer's line."""
    notes = []
    if model_props.FINE_TUNED_FROM_MODEL_ID in model:
        notes.append(f"fine-tuned from Model #{model[model_props.FINE_TUNED_FROM_MODEL_ID]}")
    elif model.get(model_props.INIT_FROM):
        notes.append(f"fine-tuned from {model.get(model_props.INIT_FROM)}")
    if model.get(model_props.TUNED_HYPERPARAMETERS):
        notes.append(f"tuned {model[model_props.TUNED_HYPERPARAMETERS]}")
    return "; ".join(notes)
