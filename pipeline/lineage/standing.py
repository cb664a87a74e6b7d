"""Where a model stands against the compressors users know (gzip / xz), in plain words, from the
MLMD properties: the whole-document figures of the Evaluator (the headline) and the Trainer's
window-sample figures (what training optimises: 128-byte windows, shuffled, no file around them)."""

from __future__ import annotations

from components.model import properties as model_props
from components.evaluation import properties as eval_props
from components.evaluation.documents import COMPARABLE_BYTES, DOCUMENT_FIGURES
from components.evaluation.held_out_sets import SET_COUNTS, SETS_PROPERTY, property_name


def _versus(model_bpb: float, compressors) -> str:
    """"beats zlib-9 by 0.312 and lzma-9 by 0.041", "beats zlib-9 by 0.312; behind lzma-9 by
    0.120" or "behind zlib-9 by ... and lzma-9 by ..." (bits/byte; lower is better)."""
    beats = [f"{name} by {bpb - model_bpb:.3f}" for name, bpb in compressors if model_bpb < bpb]
    behind = [f"{name} by {model_bpb - bpb:.3f}" for name, bpb in compressors if model_bpb >= bpb]
    return "; ".join(([f"beats {' and '.join(beats)}"] if beats else []) +
                     ([f"behind {' and '.join(behind)}"] if behind else []))


def compressor_standing(model: dict) -> str:
    """The Trainer's window-sample standing: "beats zlib-9 by 0.312; behind lzma-9 by 0.120
    bits/byte (same eval sample)". "" when a figure is missing (an older model artifact)."""
    figures = [model.get(k) for k in (model_props.EVAL_BITS_PER_BYTE, model_props.ZLIB9_BITS_PER_BYTE,
                                      model_props.LZMA9_BITS_PER_BYTE)]
    if not all(isinstance(f, float) for f in figures):
        return ""
    return _versus(figures[0], (("zlib-9", figures[1]), ("lzma-9", figures[2]))) + \
        " bits/byte (same eval sample)"


def _standing_lines(figures: dict, label: str, what: str) -> list[str]:
    """A figure set's standing lines (DOCUMENT_FIGURES order, unprefixed keys); [] if absent."""
    (model_bpb, se, zlib_doc, lzma_doc, zlib_cat, lzma_cat) = (figures.get(k) for k in DOCUMENT_FIGURES)
    if not all(isinstance(f, float) for f in (model_bpb, zlib_doc, lzma_doc)):
        return []
    scored = figures.get(eval_props.DOCUMENT_BYTES)
    small = isinstance(scored, (int, float)) and scored < COMPARABLE_BYTES
    head = (f"  {label:<26} {model_bpb:.4f} bits/byte (+/- {se or 0.0:.4f}) on "
            f"{figures.get(eval_props.DOCUMENT_COUNT)} {what}, {int(scored) if small else scored} "
            f"bytes")
    if small:
        return [f"{head}: too few bytes to compare with zlib-9 / lzma-9 (under {COMPARABLE_BYTES} "
                f"their headers dominate)"]
    versus = _versus(model_bpb, (("zlib-9", zlib_doc), ("lzma-9", lzma_doc)))
    lines = [f"{head}: {versus} (each document compressed alone: zlib-9 {zlib_doc:.4f}, lzma-9 "
             f"{lzma_doc:.4f})"]
    if isinstance(zlib_cat, float) and isinstance(lzma_cat, float):
        lines.append(f"  {'  concatenated':<26} zlib-9 {zlib_cat:.4f}, lzma-9 "
                     f"{lzma_cat:.4f} bits/byte (one archive of the same documents)")
    return lines


def set_names(evaluation: dict) -> list[str]:
    """The held-out sets a ModelEvaluation holds figures of."""
    return [n for n in str(evaluation.get(SETS_PROPERTY) or "").split(",") if n]


def document_standing(evaluation: dict) -> list[str]:
    """The report's standing lines from the Evaluator's whole-document figures, the eval split's
    then each held-out set's; [] when absent (an older ModelEvaluation)."""
    lines = _standing_lines(evaluation, "whole documents", "eval documents")
    for name in set_names(evaluation):
        prefixed = {k: evaluation.get(property_name(name, k)) for k in
                    DOCUMENT_FIGURES + (eval_props.DOCUMENT_COUNT, eval_props.DOCUMENT_BYTES)}
        lines += _standing_lines(prefixed, f"held-out {name}", "documents") + skipped_line(
            evaluation, name)
    return lines + task_lines(evaluation)


def skipped_line(evaluation: dict, name: str) -> list[str]:
    """A held-out set's texts skipped as not text (held_out_sets.SET_COUNTS); [] when none."""
    counts = {c[len("skipped_"):]: int(evaluation.get(property_name(name, c)) or 0) for c in SET_COUNTS}
    shown = ", ".join(f"{n} {reason}" for reason, n in counts.items() if n)
    return [f"  {'  skipped':<26} {shown} text(s) of held-out {name}: not scored"] if shown else []


def task_lines(evaluation: dict) -> list[str]:
    """The code tasks' line (components/evaluation/tasks.py); [] when none ran."""
    if evaluation.get(eval_props.TASK_ITEMS) == 0:
        return [f"  {'code tasks':<26} none: held-out {evaluation.get(eval_props.TASK_SET)} "
                f"yields no task item (no eligible line, or one document only)"]
    if not isinstance(evaluation.get(eval_props.TASK_CHOICE_ACCURACY), float):
        return []
    return [f"  {'code tasks':<26} {evaluation.get(eval_props.TASK_ITEMS)} lines of held-out "
            f"{evaluation.get(eval_props.TASK_SET)}: next-line completion exact match "
            f"{evaluation[eval_props.TASK_COMPLETION_EXACT_MATCH]:.3f}, edit similarity "
            f"{evaluation[eval_props.TASK_COMPLETION_EDIT_SIMILARITY]:.3f}; 4-way choice accuracy "
            f"{evaluation[eval_props.TASK_CHOICE_ACCURACY]:.3f} (centred "
            f"{evaluation[eval_props.TASK_CHOICE_CENTRED_ACCURACY]:+.3f}, 0 = chance)"]
