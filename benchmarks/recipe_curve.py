"""Bits per byte against training wall time, for the Trainer runs named on the command line
(docs/img/recipe-bits-per-byte.png: the old default, the new default, the `cpu` preset).

Each curve is the Trainer's own training loss as logged to TensorBoard (`<model_run>/train`,
every train.log_every steps), turned into bits per byte with the tokenizer's bytes per token
(1 for the byte tokenizer: one token per UTF-8 byte), against seconds since the first logged
step (the event timestamps). Training loss on fresh batches, not eval loss: each run's final eval
bits/byte is drawn as a marker at its end, and zlib-9 / lzma-9 on the byte runs' eval sample as
horizontal lines, all read from the run's training_summary.json.

    .venv/bin/python benchmarks/recipe_curve.py --run "old default=HOME_OR_MODEL_RUN_DIR" \\
        --run "new default=DIR" [--run "cpu preset=DIR:BYTES_PER_TOKEN"] --out docs/img/recipe-bits-per-byte.png
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runners.local.home import PIPELINES_FOLDER  # noqa: E402


SMOOTH = 5


def model_run_dir(path: str) -> str:
    """A Trainer model_run folder, or the newest one under a bigtrain home."""
    if os.path.isdir(os.path.join(path, "train")):
        return path
    found = sorted(glob.glob(os.path.join(path, PIPELINES_FOLDER, "*", "Trainer", "model_run", "*")),
                   key=lambda p: int(os.path.basename(p)) if os.path.basename(p).isdigit() else -1)
    if not found:
        sys.exit(f"{path}: neither a model_run folder nor a home with a Trainer run")
    return found[-1]


def loss_curve(run_dir: str) -> list[tuple[float, float]]:
    """(seconds since the first logged step, training loss in nats/token) from the event files."""
    import tensorflow as tf
    points = []
    for name in sorted(glob.glob(os.path.join(run_dir, "train", "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(name):
            for value in event.summary.value:
                if value.tag == "loss":
                    points.append((event.wall_time, float(tf.make_ndarray(value.tensor))))
    if not points:
        sys.exit(f"{run_dir}: no logged loss")
    points.sort()
    return [(t - points[0][0], loss) for t, loss in points]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=DIR[:BYTES_PER_TOKEN]")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    drawn = {}   # compressor line -> labels of the runs whose eval sample gives that value
    for spec in args.run:
        label, _, rest = spec.partition("=")
        path, _, per_token = rest.partition(":")
        run_dir = model_run_dir(path)
        bytes_per_token = float(per_token or 1.0)
        to_bpb = 1.0 / (math.log(2) * bytes_per_token)
        curve = loss_curve(run_dir)
        # One logged batch is a noisy point (streams differ in how compressible they are): the
        # mean of the last SMOOTH logged losses.
        smooth = [sum(l for _, l in curve[max(0, i - SMOOTH + 1):i + 1]) / len(curve[max(0, i - SMOOTH + 1):i + 1])
                  for i in range(len(curve))]
        line, = ax.plot([max(t, 1.0) for t, _ in curve], [loss * to_bpb for loss in smooth], label=label)
        with open(os.path.join(run_dir, "training_summary.json"), encoding="utf-8") as fh:
            summary = json.load(fh)
        end = curve[-1][0]
        ax.plot([end], [summary["eval_bits_per_byte"]], "o", color=line.get_color())
        ax.annotate(f"eval {summary['eval_bits_per_byte']:.3f}", (end, summary["eval_bits_per_byte"]),
                    textcoords="offset points", xytext=(4, 6), fontsize=8, color=line.get_color())
        for name, key in (("zlib-9", "zlib9_bits_per_byte"), ("lzma-9", "lzma9_bits_per_byte")):
            drawn.setdefault((name, round(summary[key], 3)), []).append(label)
    everyone = len(args.run)
    for (name, value), labels in drawn.items():
        ax.axhline(value, linestyle=":" if name == "zlib-9" else "--", linewidth=0.8, color="gray")
        whose = "every run's eval sample" if len(labels) == everyone else ", ".join(labels)
        ax.annotate(f"{name} {value:.3f} ({whose})", (1.0, value), fontsize=7,
                    textcoords="offset points", xytext=(2, 2), color="gray")
    ax.set_xscale("log")
    ax.set_xlabel("training wall time (s, log scale)")
    ax.set_ylabel(f"bits per byte (training loss, mean of {SMOOTH} logs; dot: eval)")
    ax.set_ylim(1.0, 5.0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
