"""Recipe sweep: which tokenizer, block, width, depth, batch, learning rate and schedule give the
lowest bits per byte on whole held-out documents for the main job's training budget (issue 40,
item 5: the honest figure, not the window sample's).

Every trial is a whole `bigtrain run` (through the Evaluator, which scores whole documents) in a
home per tokenizer, so the data stages run once per tokenizer and are cached after. The figures
are the Evaluator's: the window sample (what training optimises), the eval split's whole
documents and each held-out set's, beside zlib-9 and lzma-9 on the same documents, each file
compressed alone. Every trial is blessed and pushed (eval.max_loss and the regression allowance
at 100: the sweep ranks models, it does not gate them). Trials run one after another on this
machine, side by side, so their times compare; the machine is printed. Overrides are on top of
the default (`tiny`) preset; `preset=NAME` in a trial starts from another preset.

    .venv/bin/python benchmarks/recipe_sweep.py --root /tmp/sweep [--only NAME ...] [--out FILE]
    .venv/bin/python benchmarks/recipe_sweep.py --root /tmp/sweep --trial mine data.tokenizer=bytes ...
    .venv/bin/python benchmarks/recipe_sweep.py --plot FILE.png --from FILE   (bits/byte vs time)

The table of 2026-11-28 (benchmarks/results/2026-11-28-recipe.md) is this script's output; its
reading in docs/benchmarks.md, "Recipe".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _machine import children_cpu_seconds, describe  # noqa: E402

SP = ("data.tokenizer=sentencepiece",)
# name -> overrides on the default preset (tiny: llama 4 x 64 on bytes, 16 x 128 for 1000 steps,
# wsd). The others change one thing each at about the same training time, and the `cpu` preset.
TRIALS = {
    "default": (),
    "gqa-2": ("model.n_kv_head=2",),
    "gpt2": ("model.arch=gpt2",),
    "cosine": ("train.lr_schedule=cosine",),
    "batch-32x500": ("train.global_batch_size=32", "train.train_steps=500"),
    "llama-96x650": ("model.d_model=96", "model.n_kv_head=2", "train.train_steps=650"),
    "sp-default": SP,
    # Two that the whole-split order (2026-12-07) may reward: a step of fresh, uncorrelated
    # sequences bears a larger step (learning rate x2) or a wider model at the default's steps.
    "lr-6e-3": ("train.learning_rate=6e-3", "train.min_learning_rate=6e-4"),
    "llama-96x1000": ("model.d_model=96", "model.n_kv_head=2"),
    "cpu-preset": ("preset=cpu",),
}
FIGURES = ("parameter_count", "steps", "tokens_seen", "tokens_per_second", "eval_loss",
           "eval_bits_per_byte", "zlib9_bits_per_byte", "lzma9_bits_per_byte")


def parse_report(report: str) -> dict:
    """The Trainer's row seconds and the `training:` block's figures from a run report."""
    out = {}
    match = re.search(r"^\s+Trainer\s+complete\s+([\d.]+)", report, re.M)
    if match:
        out["trainer_seconds"] = float(match.group(1))
    block = report.split("\ntraining: ", 1)[-1] if "\ntraining: " in report else ""
    for line in block.splitlines()[1:]:
        parts = line.split()
        if not line.startswith("  ") or len(parts) != 2:
            break
        if parts[0] in FIGURES:
            out[parts[0]] = float(parts[1])
    out.update(parse_documents(report))
    return out


# The Evaluator's console lines (components/evaluation/component.py, log_documents), e.g.
# "held-out bigtrain_code: 2.8023 bits/byte (zlib-9 2.7984, lzma-9 2.8659, each document alone)"
DOCUMENT_LINE = re.compile(r"(whole documents|held-out \S+): ([\d.]+) bits/byte \(zlib-9 ([\d.]+), "
                           r"lzma-9 ([\d.]+), each document alone\)")


def parse_documents(log: str) -> dict:
    """{"documents": {...}, "held_out": {...}}: model, zlib-9 and lzma-9 bits/byte per line."""
    out = {}
    for label, model, zlib9, lzma9 in DOCUMENT_LINE.findall(log):
        key = "documents" if label == "whole documents" else "held_out"
        out[key] = {"set": label, "model": float(model), "zlib9": float(zlib9),
                    "lzma9": float(lzma9)}
    return out


# The gate is not what a sweep ranks: every trial is blessed (and pushed into the sweep's home).
BLESS_ALL = ("export.quantize=[]", "eval.max_loss=100", "eval.max_loss_regression=100")


def trial_command(home: str, overrides: tuple[str, ...], extra: list[str]) -> list[str]:
    """`bigtrain run` for one trial: `preset=NAME` becomes --preset NAME, the rest --set."""
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    preset = [a for o in overrides if o.startswith("preset=") for a in ("--preset", o[7:])]
    settings = [o for o in (*BLESS_ALL, *overrides, *extra) if not o.startswith("preset=")]
    return [bigtrain, "run", "--home", home, *preset, *[a for o in settings for a in ("--set", o)]]


def run_trial(root: str, name: str, overrides: tuple[str, ...], extra: list[str]) -> dict:
    tokenizer = next((o.split("=", 1)[1] for o in overrides if o.startswith("data.tokenizer=")),
                     "default")
    command = trial_command(os.path.join(root, f"home-{tokenizer}"), overrides, extra)
    started, cpu_before = time.perf_counter(), children_cpu_seconds()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, children_cpu_seconds() - cpu_before
    if proc.returncode:
        sys.exit(f"trial {name} failed ({proc.returncode}): {' '.join(command)}\n"
                 f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return {"name": name, "overrides": list(overrides) + extra, "wall_seconds": round(wall, 1),
            "cpu_seconds": round(cpu, 1),
            **parse_report(proc.stdout + "\n" + proc.stderr)}


HEADER = ("| trial | params | steps | Trainer s | run CPU s | window | eval documents (zlib-9, lzma-9) "
          "| held-out | zlib-9 | lzma-9 | held-out vs zlib-9 | vs lzma-9 |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def row(result: dict) -> str:
    nan = {"model": float("nan"), "zlib9": float("nan"), "lzma9": float("nan")}
    docs, held = result.get("documents", nan), result.get("held_out", nan)
    return (f"| {result['name']} | {result.get('parameter_count', 0):,.0f} | "
            f"{result.get('steps', 0):.0f} | {result.get('trainer_seconds', 0):.1f} | "
            f"{result['cpu_seconds']:.0f} | {result.get('eval_bits_per_byte', float('nan')):.3f} | "
            f"{docs['model']:.3f} ({docs['zlib9']:.3f}, {docs['lzma9']:.3f}) | "
            f"{held['model']:.3f} | {held['zlib9']:.3f} | {held['lzma9']:.3f} | "
            f"{held['model'] - held['zlib9']:+.3f} | {held['model'] - held['lzma9']:+.3f} |")


def plot(results: list[dict], out: str) -> None:
    """Held-out bits/byte of each trial's model against its Trainer seconds, and zlib-9 and
    lzma-9 on the same documents (one value each: every byte-level trial scores the same files)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    scored = [r for r in results if "held_out" in r and "trainer_seconds" in r]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for r in scored:
        ax.plot(r["trainer_seconds"], r["held_out"]["model"], "o", color="tab:blue")
        ax.annotate(r["name"], (r["trainer_seconds"], r["held_out"]["model"]), fontsize=8,
                    xytext=(4, 3), textcoords="offset points")
    for key, colour in (("zlib9", "tab:orange"), ("lzma9", "tab:green")):
        ax.axhline(scored[0]["held_out"][key], color=colour, linestyle="--",
                   label=f"{key[:4]}-9 ({scored[0]['held_out'][key]:.3f})")
    ax.set_xscale("log")
    ax.set_xlabel("Trainer seconds (log)")
    ax.set_ylabel(f"bits per byte, {scored[0]['held_out']['set']} (whole files)")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def select_trials(only: list[str] | None, parser: argparse.ArgumentParser) -> dict:
    """TRIALS, or the named ones in the order given (the most wanted first when time is short);
    an unknown name stops the sweep before any trial runs."""
    unknown = [n for n in only or () if n not in TRIALS]
    if unknown:
        parser.error(f"--only: no trial {', '.join(unknown)} (trials: {', '.join(TRIALS)})")
    return {n: TRIALS[n] for n in only} if only else dict(TRIALS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="folder for the homes (one per tokenizer)")
    parser.add_argument("--only", nargs="*", help="trial names from TRIALS, run in this order (default: all)")
    parser.add_argument("--trial", nargs="+", action="append", default=[], metavar="NAME KEY=VALUE",
                        help="an extra trial: a name, then its overrides")
    parser.add_argument("--set", dest="common", action="append", default=[],
                        help="an override for every trial")
    parser.add_argument("--out", help="append each result as a JSON line to this file")
    parser.add_argument("--plot", help="write the held-out figures of --from's results to this PNG")
    parser.add_argument("--from", dest="results", help="a JSON-lines file of earlier results")
    args = parser.parse_args()
    if args.plot:
        with open(args.results, encoding="utf-8") as fh:
            plot([json.loads(line) for line in fh if line.strip()], args.plot)
        return 0
    if not args.root:
        parser.error("--root is required to run trials")
    trials = select_trials(args.only, parser)
    trials.update({t[0]: tuple(t[1:]) for t in args.trial})
    print(f"machine: {describe()}; {time.strftime('%Y-%m-%d')}", flush=True)
    print(HEADER, flush=True)
    for name, overrides in trials.items():
        result = run_trial(args.root, name, overrides, args.common)
        print(row(result), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
