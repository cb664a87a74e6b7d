"""Tuning and fine-tuning in the run report: plain functions over the artifact properties the
report reads from MLMD (no TensorFlow import)."""

from __future__ import annotations

import json

from components.tuner.space import OBJECTIVE_NAME


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def tuner_line(results: dict) -> str:
    """One line for the Tuner stage: trials, algorithm, best objective and trial."""
    best = results.get(f"best_{OBJECTIVE_NAME}")
    return (f"{results.get('trials_completed')}/{results.get('trials')} trials "
            f"({results.get('algorithm')}), best {OBJECTIVE_NAME} {_fmt(best)} "
            f"(trial {results.get('best_trial')})")


def trials_table(results: dict) -> list[str]:
    """The trials table: one row per trial, its values, steps, seconds and objective."""
    records = json.loads(results.get("trials_json") or "[]")
    if not records:
        return []
    keys = sorted({k for r in records for k in r["values"]})
    header = ["trial", "status", *keys, "steps", "seconds", OBJECTIVE_NAME]
    rows = [[r["trial_id"] + (" *" if r["trial_id"] == results.get("best_trial") else ""),
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
    if "fine_tuned_from_model_id" in model:
        notes.append(f"fine-tuned from Model #{model['fine_tuned_from_model_id']}")
    elif model.get("init_from"):
        notes.append(f"fine-tuned from {model.get('init_from')}")
    if model.get("tuned_hyperparameters"):
        notes.append(f"tuned {model['tuned_hyperparameters']}")
    return "; ".join(notes)
