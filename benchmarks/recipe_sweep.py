"""Recipe sweep: which tokenizer, block, width, depth, batch, learning rate and schedule give the
lowest eval bits per byte for the main job's training budget (issue: a model worth serving).

Every trial is a whole `bigtrain run --until Trainer` in a home per tokenizer, so the data stages
run once per tokenizer and are cached after, and the figures are the Trainer's own (eval sample,
zlib-9 and lzma-9 on the same sample). Trials run one after another on this machine, side by side,
so their wall times compare; the machine is printed. Variants are not exported (export.quantize=[])
because the sweep ranks models, not variants.

    .venv/bin/python benchmarks/recipe_sweep.py --root /tmp/sweep [--only NAME ...] [--out FILE]
    .venv/bin/python benchmarks/recipe_sweep.py --root /tmp/sweep --trial mine data.tokenizer=bytes ...

The table (docs/benchmarks.md, "Recipe": how the recipe was chosen) is this script's output.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _machine import describe  # noqa: E402

SP = ("data.tokenizer=sentencepiece",)
BYTES = ("data.tokenizer=bytes",)
# name -> overrides. The first is today's default (gpt2 block, bytes, d_model 64, 500 steps).
TRIALS = {
    "old-default": BYTES + ("model.arch=gpt2",),
    "bytes-llama-64": BYTES + ("model.arch=llama", "model.n_kv_head=2"),
    "sp-gpt2-64": SP + ("model.arch=gpt2",),
    "sp-llama-64": SP + ("model.arch=llama", "model.n_kv_head=2"),
    "sp-llama-96": SP + ("model.arch=llama", "model.d_model=96", "model.n_head=4", "model.n_kv_head=2",
                         "train.train_steps=400"),
    "sp-llama-128": SP + ("model.arch=llama", "model.d_model=128", "model.n_head=4",
                          "model.n_kv_head=2", "train.train_steps=300"),
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
    return out


def _children_cpu_seconds() -> float:
    """User + system CPU of finished child processes: on a shared machine the CPU a trial used
    is a fairer cost than its wall time, which grows with everyone else's load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_trial(root: str, name: str, overrides: tuple[str, ...], extra: list[str]) -> dict:
    tokenizer = next((o.split("=", 1)[1] for o in overrides if o.startswith("data.tokenizer=")),
                     "default")
    home = os.path.join(root, f"home-{tokenizer}")
    bigtrain = os.path.join(os.path.dirname(sys.executable), "bigtrain")
    command = [bigtrain, "run", "--home", home, "--until", "Trainer", "--set", "export.quantize=[]",
               *[a for o in (*overrides, *extra) for a in ("--set", o)]]
    started, cpu_before = time.perf_counter(), _children_cpu_seconds()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, _children_cpu_seconds() - cpu_before
    if proc.returncode:
        sys.exit(f"trial {name} failed ({proc.returncode}): {' '.join(command)}\n"
                 f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return {"name": name, "overrides": list(overrides) + extra, "wall_seconds": round(wall, 1),
            "cpu_seconds": round(cpu, 1),
            **parse_report(proc.stdout)}


def row(result: dict) -> str:
    bpb, zlib, lzma = (result.get(k, float("nan")) for k in
                       ("eval_bits_per_byte", "zlib9_bits_per_byte", "lzma9_bits_per_byte"))
    return (f"| {result['name']} | {result.get('parameter_count', 0):,.0f} | "
            f"{result.get('steps', 0):.0f} | {result.get('tokens_seen', 0):,.0f} | "
            f"{result.get('trainer_seconds', 0):.1f} | {result['cpu_seconds']:.0f} | "
            f"{result.get('tokens_per_second', 0):,.0f} | "
            f"{bpb:.3f} | {zlib:.3f} | {lzma:.3f} | {bpb - zlib:+.3f} | {bpb - lzma:+.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="folder for the homes (one per tokenizer)")
    parser.add_argument("--only", nargs="*", help="trial names from TRIALS (default: all)")
    parser.add_argument("--trial", nargs="+", action="append", default=[], metavar="NAME KEY=VALUE",
                        help="an extra trial: a name, then its overrides")
    parser.add_argument("--set", dest="common", action="append", default=[],
                        help="an override for every trial")
    parser.add_argument("--out", help="append each result as a JSON line to this file")
    args = parser.parse_args()
    trials = {n: o for n, o in TRIALS.items() if not args.only or n in args.only}
    trials.update({t[0]: tuple(t[1:]) for t in args.trial})
    print(f"machine: {describe()}; {time.strftime('%Y-%m-%d')}", flush=True)
    print("| trial | params | steps | tokens | Trainer s | run CPU s | tokens/s | bits/byte | zlib-9 "
          "| lzma-9 | vs zlib | vs lzma |\n|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for name, overrides in trials.items():
        result = run_trial(args.root, name, overrides, args.common)
        print(row(result), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
