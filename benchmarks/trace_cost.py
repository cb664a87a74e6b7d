"""Start-up cost of a training run: CPU seconds of the first call of bigtrain's train step as the
product builds it against two variants, in one run: the same Python function traced with
autograph on (tf.function's default; the product's until 2026-11-28), and the optimizer with
Keras's own AdamW update (the learning rate and alpha per variable and replica; the product's
until 2026-12-06: optimizer._StepScalarsOnce).

    python benchmarks/trace_cost.py                  # tiny preset: one_device, and mirrored on 2 CPU replicas
    python benchmarks/trace_cost.py --repeats 5

Each measurement is a fresh process, as a `bigtrain run` or a train worker is: autograph keeps
what it converted for the life of a process, so a process's first trace is the one that pays for
the conversion (parsing and rewriting the source of every function the step calls). The child
builds the tiny model, then times the first train step (its trace, Grappler's rewrite and one
step) in its own CPU seconds. The variants alternate; medians are printed with the machine.
(The evaluation's batch function gained nothing measurable without autograph: 0.71 against
0.63 CPU-s, within the noise, 2026-11-28; it keeps TF's default.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._machine import cpu_seconds, describe  # noqa: E402


VARIANTS = ("as built", "autograph on", "Keras's AdamW update")


def child(strategy_name: str, variant: str) -> float:
    """In a fresh process: CPU seconds of the first train step."""
    import keras
    import numpy as np
    import tensorflow as tf

    from components.config import build_config
    from components.tokenizer.byte_level import PAD_ID
    from components.training import loop, optimizer as optimizer_lib, train_step
    from components.training.strategy import make_strategy

    if variant == VARIANTS[2]:
        class KerasAdamW(optimizer_lib._PreReduced, keras.optimizers.AdamW):
            pass
        optimizer_lib.PreReducedAdamW = KerasAdamW      # what make_optimizer builds
    config = build_config("tiny", overrides=[f"runtime.strategy={strategy_name}"])
    strategy = make_strategy(config.runtime)
    model, state, optimizer, _ = loop.build_training(config, strategy)
    step = train_step.make_train_step(
        model, optimizer, strategy, state, global_batch_size=config.train.global_batch_size,
        accumulation_steps=config.train.accumulation_steps, clip_norm=config.train.clip_norm,
        dynamic_loss_scale=False, pad_id=PAD_ID)
    if variant == VARIANTS[1]:
        step = tf.function(step.python_function)        # the same function, autograph on
    batch, seq_len = config.train.global_batch_size, config.data.seq_len
    ids = np.random.default_rng(0).integers(1, 256, size=(batch, seq_len + 1))   # (B, T + 1)
    start = cpu_seconds()
    step(iter([(tf.constant(ids[:, :-1]), tf.constant(ids[:, 1:]))]))
    return cpu_seconds() - start


def measure(strategy_name: str, variant: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", strategy_name,
                          "--variant", variant],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=VARIANTS, default=VARIANTS[0], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.variant)))
        return
    print(f"machine: {describe()}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}")
    for strategy_name in ("one_device", "mirrored"):
        runs = {variant: [] for variant in VARIANTS}
        for _ in range(args.repeats):
            for variant in VARIANTS:
                runs[variant].append(measure(strategy_name, variant))
        built = statistics.median(runs[VARIANTS[0]])
        for variant in VARIANTS[1:]:
            other = statistics.median(runs[variant])
            print(f"{strategy_name}: first train step {built:.2f} CPU-s as built vs {other:.2f} "
                  f"with {variant}: {built / other:.2f}x (medians of {args.repeats} fresh "
                  f"processes each; all: {spread(runs[VARIANTS[0]])} vs {spread(runs[variant])})")


def spread(values) -> str:
    return " ".join(f"{v:.2f}" for v in sorted(values))


if __name__ == "__main__":
    main()
