"""Training curves for `bigtrain ui`: scalars from a run's TensorBoard event files (tensorboard's
EventAccumulator), drawn server-side as SVG by matplotlib, so the page needs no JavaScript."""

from __future__ import annotations

import io
import os
import sys
import types

# The curves the UI shows, by the tag training writes (components/training/loop.py); "mfu" is
# shown when a run logs it.
CURVES = (("loss", "loss"), ("validation_loss", "validation loss (train.eval_every)"),
          ("learning_rate", "learning rate"),
          ("tokens_per_second", "tokens/s"), ("mfu", "MFU"))


def tensorboard_without_tensorflow() -> None:
    """Make tensorboard use its bundled TensorFlow stub instead of importing TensorFlow (10-30 s):
    tensorboard.compat.tf() takes the stub when the module `tensorboard.compat.notf` imports (the
    switch its no-TF builds ship). Has no effect once TensorFlow is imported anyway."""
    if "tensorflow" not in sys.modules:
        sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))


def warm_up() -> None:
    """Import what the pages use once, at start (a cold import costs seconds on the first page)."""
    tensorboard_without_tensorflow()
    import matplotlib.figure  # noqa: F401
    import networkx  # noqa: F401
    from matplotlib.backends import backend_svg  # noqa: F401
    from tensorboard.backend.event_processing import event_accumulator  # noqa: F401


def read_scalars(log_dir: str) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] from the event files under log_dir (its sub-folders too), one point
    per step: a step written again (a spike rollback's steps, a run resumed into the folder of the
    run it resumes after a crash past its checkpoint) keeps the value written last."""
    tensorboard_without_tensorflow()
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util
    out: dict[str, dict[int, float]] = {}
    for folder, _, files in os.walk(log_dir):
        if not any(".tfevents." in f for f in files):
            continue
        acc = event_accumulator.EventAccumulator(folder, size_guidance={
            event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
        acc.Reload()
        tags = acc.Tags()
        for tag in tags.get("scalars", []):   # in the order written
            out.setdefault(tag, {}).update((e.step, float(e.value)) for e in acc.Scalars(tag))
        for tag in tags.get("tensors", []):  # tf.summary.scalar in TF2 writes tensors
            out.setdefault(tag, {}).update(
                (e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag))
    return {tag: sorted(points.items()) for tag, points in out.items()}


def svg_chart(points: list[tuple[int, float]], title: str) -> str:
    """One curve as an SVG document (matplotlib, Agg-free SVG backend)."""
    from matplotlib.figure import Figure
    figure = Figure(figsize=(5, 2.6), dpi=72)
    axes = figure.subplots()
    axes.plot([p[0] for p in points], [p[1] for p in points], linewidth=1.5)
    axes.set_title(title)
    axes.set_xlabel("step")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline in the page: no XML prolog
