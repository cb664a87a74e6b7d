"""Where the Trainer stage's time goes after its training loop (issue 58, deliverable 3).

    python benchmarks/trainer_outside_loop.py                         # the tiny preset's run shape
    python benchmarks/trainer_outside_loop.py --quantize int8,tflite  # with the other variants

Trains the tiny preset a few steps on random byte shards (benchmarks/_shards.py; a train split
larger than the unigram baseline's 20,000-sequence fit, an eval split larger than the 3,200-sequence
evaluation sample), runs one validation as the loop does (train.eval_every: it reads the eval
split for the evaluation sample and scores its head), then what run_fn runs after loop.train,
through the same functions and PhaseTimes (components/training/run_fn.py): the final evaluation
(eval.batch_size x eval.max_batches sequences), the compressor figures, the unigram baseline, the
export of each variant and the summary write. Prints the machine, run_fn's phase line, wall and
CPU seconds of the whole, and the parts that explain the phases: a validation reading its own
slice and the evaluation sample's read alone (the two reads before issue 58), and the unigram
baseline with the sample cached. One process, each phase once, as in a run: tracing is part of
the cost a run pays. The stage's figures are the same on any machine; its seconds are not: on a
shared machine read the CPU-s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from benchmarks._shards import write_random_shard  # noqa: E402


class Records(logging.Handler):
    """The export's per-variant log lines (components/serving/variants.py)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def timed(label: str, fn, rows: list):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    rows.append((label, time.perf_counter() - wall, time.process_time() - cpu))
    return out


def trained_model(config, train: str, workdir: str, steps: int):
    from components.storage import checkpoints
    from components.training import loop
    config = dataclasses.replace(config, train=dataclasses.replace(
        config.train, train_steps=steps, checkpoint_every=10**6, log_every=steps, warmup_steps=1,
        eval_every=0, keep_best=False))
    return loop.train(config, train, os.path.join(workdir, "run"), checkpoints.root(workdir))


def stage_phases(config, fn_args, result, tokenizer):
    """run_fn's phases after the loop, timed by its own PhaseTimes (returned, with the baseline).
    Their modules are imported before (a run imports them before its loop)."""
    from components.storage import fs
    from components.serving.variants import export_variants
    from components.training import run_fn as run_fn_lib
    times = run_fn_lib.PhaseTimes()
    metrics, baseline = run_fn_lib.evaluate_trained(result.model, config, fn_args, tokenizer, times)
    summary = {"eval_loss": metrics["loss"], "unigram_baseline_loss": baseline}
    with times.phase("export"):
        export_variants(result.model, config.model, config.data.seq_len, fn_args.model_dir,
                        tokenizer=tokenizer, quantize=config.export.quantize,
                        max_new_tokens_limit=config.export.max_new_tokens,
                        metadata={"training": summary})
    with times.phase("summary"):
        fs.write_text(os.path.join(fn_args.model_dir, "training_summary.json"),
                      json.dumps(summary, indent=2, sort_keys=True))
    return times, baseline


def validation_in_the_loop(config, fn_args, result, tokenizer, workdir: str) -> float:
    """One validation as the loop runs it (train.eval_every; components/training/validation.py),
    from a cold cache: it reads the split for the evaluation sample, whose head it scores."""
    import tensorflow as tf
    from components.metrics.lm import _cached_sample
    from components.training.validation import Validation
    _cached_sample.cache_clear()
    state = types.SimpleNamespace(best_validation_loss=tf.Variable(float("inf")),
                                  best_validation_step=tf.Variable(0, dtype=tf.int64))
    checks = Validation.from_config(config, fn_args.eval_files, tokenizer)
    return checks.run(result.model, state, 1, lambda step, figures: None, workdir)


def parts(config, fn_args, result, tokenizer, rows: list) -> None:
    """The reads and the validation that explain the phases, each alone."""
    from components.metrics.lm import _cached_sample, eval_sample, evaluate_logits_fn, sample_size
    from components.training import loop
    seq_len = config.data.seq_len
    _cached_sample.cache_clear()
    timed(f"one validation reading its own {config.train.eval_batches} x {config.eval.batch_size}"
          " (before issue 58)",
          lambda: evaluate_logits_fn(lambda ids: result.model(ids, training=False),
                                     fn_args.eval_files, seq_len, config.eval.batch_size,
                                     config.train.eval_batches, tokenizer=tokenizer), rows)
    _cached_sample.cache_clear()
    timed(f"eval sample read alone ({sample_size(config.eval)} of the eval split: the final eval's"
          " second read before issue 58)",
          lambda: eval_sample(fn_args.eval_files, seq_len, sample_size(config.eval)), rows)
    timed("unigram baseline, sample cached (the train read + the fit)",
          lambda: loop.unigram_baseline(fn_args.train_files, fn_args.eval_files, seq_len,
                                        sample_size(config.eval), vocab_size=tokenizer.vocab_size,
                                        pad_id=tokenizer.pad_id), rows)


def main(argv=None) -> None:
    from components.config import build_config
    from components.tokenizer.byte_level import ByteTokenizer
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train-sequences", type=int, default=30000)
    parser.add_argument("--eval-sequences", type=int, default=8000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--quantize", default="", help="comma-separated: int8,tflite")
    args = parser.parse_args(argv)
    quantize = [q for q in args.quantize.split(",") if q]
    config = build_config("tiny", overrides=[f"export.quantize=[{','.join(quantize)}]"])
    logging.getLogger("bigtrain.export").setLevel(logging.INFO)
    records = Records()
    logging.getLogger("bigtrain.export").addHandler(records)
    print(describe())
    print(f"tiny preset, seq_len {config.data.seq_len}; {args.train_sequences} train / "
          f"{args.eval_sequences} eval random sequences; {args.steps} steps; variants: float "
          f"{' '.join(quantize)}")
    with tempfile.TemporaryDirectory() as workdir:
        train = write_random_shard(os.path.join(workdir, "train-0.gz"), args.train_sequences,
                                   config.data.seq_len)
        evals = write_random_shard(os.path.join(workdir, "eval-0.gz"), args.eval_sequences,
                                   config.data.seq_len)
        rows = []
        result = timed("training loop (for reference)",
                       lambda: trained_model(config, train, workdir, args.steps), rows)
        tokenizer = ByteTokenizer()
        fn_args = types.SimpleNamespace(train_files=[train], eval_files=[evals],
                                        model_dir=os.path.join(workdir, "model"))
        timed("one validation in the loop (cold: reads the eval split)",
              lambda: validation_in_the_loop(config, fn_args, result, tokenizer, workdir), rows)
        import components.serving.variants  # noqa: F401  (imported before the loop in a run)
        from components.training.run_fn import LOOP_PHASE, phases_line
        wall, cpu = time.perf_counter(), time.process_time()
        times, baseline = stage_phases(config, fn_args, result, tokenizer)
        outside_cpu = time.process_time() - cpu
        times.seconds[LOOP_PHASE] = rows[0][1]
        print(f"\nrun_fn's log line: Trainer stage: {phases_line(times.seconds)}")
        print(f"outside the loop: {time.perf_counter() - wall:.1f} s wall, {outside_cpu:.1f} CPU-s;"
              f" unigram baseline {baseline:.4f}")
        print("\n".join(f"  {line}" for line in records.lines))
        rows += [(f"phase: {name}", s, times.cpu_seconds[name]) for name, s in times.seconds.items()
                 if name != LOOP_PHASE]
        parts(config, fn_args, result, tokenizer, rows)
    print("\n| part | wall s | CPU-s |\n|---|---|---|")
    for label, w, c in rows:
        print(f"| {label} | {w:.2f} | {c:.2f} |")


if __name__ == "__main__":
    main()
