"""Attention's share of the training step at seq 128 and 1024, plain vs XLA, side by side in one run.

    python benchmarks/attention_cost.py                         # llama block, 4096 tokens/step
    python benchmarks/attention_cost.py --arch llama gpt2 --seq 128 256 512 1024

For each block type (model.arch) and each sequence length T, at the same tokens per step
(tokens = batch x T: 32 x 128 and 4 x 1024 at 4096), float32, dropout 0, one device:
  step:      bigtrain's own train step (components/training/train_step.make_train_step, a
             OneDeviceStrategy, AdamW, clipping), xla=False vs xla=True: the forward+backward of
             the whole model plus the optimizer update;
  attention: the attention core alone at the same shapes, n_layer times: q (B, H, T, D) and
             k, v (B, KV, T, D) -- what the qkv projection hands on -- through
             components/model/layers.attend (grouped as GroupedQueryAttention.attend_and_merge
             groups them for llama) forward and backward (gradients w.r.t. q, k, v), plain
             tf.function vs jit_compile=True. Each layer gets its own q, k, v so XLA cannot merge
             the n_layer copies into one. This is the part whose cost grows with T^2 (QK^T, the
             mask, softmax, weights x V); the qkv and output projections are per-token matmuls
             and stay in the step's other share.
Printed per case: median and quartiles of seconds per call, wall clock and this process's CPU
time, and the first call's wall time (tracing, and with XLA the compilation; the first path of
the process also pays its one-time warm-up); attention's share of the step (attention median /
step median) for each path; and XLA / plain time ratios (< 1: XLA faster). The paths run in alternating blocks of repetitions (plain,
XLA, plain, XLA, ...) after a warm-up that includes XLA's compilation, so a shared machine's
load falls on both alike. The figure behind runtime.xla=auto (components/training/loop.use_xla).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402

WARMUP_CALLS = 2   # the first call traces (and with XLA compiles); the second settles allocation


def model_config(arch: str, d_model: int, n_layer: int, n_head: int, n_kv_head: int):
    from components.config.tree import ModelConfig
    return ModelConfig(arch=arch, d_model=d_model, n_layer=n_layer, n_head=n_head,
                       n_kv_head=n_kv_head if arch == "llama" else 0, dropout=0.0)


def step_fn(config, batch: int, steps: int, xla: bool):
    """A zero-argument callable running one bigtrain train step on a fixed random batch."""
    import tensorflow as tf
    from components.config.tree import RuntimeConfig, TrainConfig
    from components.model.gpt import build_model
    from components.tokenizer.byte_level import VOCAB_SIZE
    from components.training.strategy import make_strategy
    from components.training.optimizer import make_optimizer
    from components.training.train_step import TrainState, make_train_step

    strategy = make_strategy(RuntimeConfig(strategy="one_device"))
    with strategy.scope():
        model = build_model(config, steps, "float32", vocab_size=VOCAB_SIZE)
        state = TrainState()
        optimizer = make_optimizer(TrainConfig(), model, learning_rate=1e-4)
    ids = tf.random.stateless_uniform([batch, steps + 1], seed=[3, 4], minval=1,
                                      maxval=VOCAB_SIZE, dtype=tf.int32)
    batches = iter(tf.data.Dataset.from_tensors((ids[:, :-1], ids[:, 1:])).repeat())
    train_step = make_train_step(model, optimizer, strategy, state, global_batch_size=batch,
                                 accumulation_steps=1, clip_norm=1.0, dynamic_loss_scale=False,
                                 xla=xla)

    def run():
        loss, _, finite = train_step(batches)
        if not bool(finite):
            raise RuntimeError("a non-finite step: the optimizer update was skipped, so the "
                               "timing would not be a full step")
        return float(loss)
    return run


def attention_fn(config, batch: int, steps: int, xla: bool):
    """A zero-argument callable: forward+backward of layers.attend n_layer times at the
    model's head layout (grouped-query for llama), on per-layer random q, k, v."""
    import tensorflow as tf
    from components.model.layers import attend, causal_mask

    heads = config.n_head
    kv = (config.n_kv_head or heads) if config.arch == "llama" else heads
    head_dim = config.d_model // heads
    shape = lambda h, i: tf.random.stateless_normal([config.n_layer, batch, h, steps, head_dim],
                                                    seed=[5, i])
    q, k, v, cotangent = shape(heads, 0), shape(kv, 1), shape(kv, 2), shape(heads, 3)

    def forward_backward(q, k, v, cotangent):
        mask = causal_mask(steps, steps)
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            total = 0.0
            for layer in range(config.n_layer):
                # As GroupedQueryAttention.attend_and_merge: (B, KV, G, T, D) queries against
                # (B, KV, 1, T, D) keys/values; G = 1 is plain multi-head attention (gpt2).
                grouped = tf.reshape(q[layer], [batch, kv, heads // kv, steps, head_dim])
                out = attend(grouped, k[layer][:, :, None], v[layer][:, :, None], mask)
                total += tf.reduce_sum(tf.reshape(out, cotangent[layer].shape) * cotangent[layer])
        return tape.gradient(total, [q, k, v])

    compiled = tf.function(forward_backward, jit_compile=xla)

    def run():
        grads = compiled(q, k, v, cotangent)
        return float(tf.reduce_sum(grads[0][0, 0, 0, 0]))
    return run


def time_alternating(runs: dict, blocks: int, repetitions: int) -> dict:
    """({name: [(wall s, CPU s), ...]}, {name: wall s of the first call}): every callable warmed
    up (the first call traces and, with XLA, compiles), then `blocks` rounds in which each runs
    `repetitions` times in turn."""
    first_call = {}
    for name, run in runs.items():
        start = time.perf_counter()
        run()
        first_call[name] = time.perf_counter() - start
        for _ in range(WARMUP_CALLS - 1):
            run()
    samples = {name: [] for name in runs}
    for _ in range(blocks):
        for name, run in runs.items():
            for _ in range(repetitions):
                wall, cpu = time.perf_counter(), time.process_time()
                run()
                samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return samples, first_call


def quartiles(values) -> tuple[float, float, float]:
    """(first quartile, median, third quartile)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def measure(arch: str, steps: int, args) -> dict:
    config = model_config(arch, args.d_model, args.n_layer, args.n_head, args.n_kv_head)
    batch = args.tokens // steps
    runs = {}
    for part, make in (("step", step_fn), ("attention", attention_fn)):
        for xla in (False, True):
            runs[f"{part} {'xla' if xla else 'plain'}"] = make(config, batch, steps, xla)
    samples, first_call = time_alternating(runs, args.blocks, args.repetitions)
    return {name: {clock: quartiles([s[i] for s in values])
                   for i, clock in enumerate(("wall", "cpu"))}
            for name, values in samples.items()}, first_call


def report(arch: str, steps: int, batch: int, result: dict, first_call: dict) -> None:
    print(f"\n{arch}, T {steps}, batch {batch}: seconds per call, median [quartiles]")
    print(f"  {'':<16} {'wall':>26} {'CPU (this process)':>26} {'first call (wall)':>18}")
    for name, clocks in result.items():
        cells = [f"{m:7.3f} [{q1:6.3f}, {q3:6.3f}]" for q1, m, q3 in clocks.values()]
        print(f"  {name:<16} {cells[0]:>26} {cells[1]:>26} {first_call[name]:>18.2f}")
    for clock in ("wall", "cpu"):
        median = {name: clocks[clock][1] for name, clocks in result.items()}
        shares = "  ".join(f"{path} {median['attention ' + path] / median['step ' + path]:5.1%}"
                           for path in ("plain", "xla"))
        ratios = "  ".join(f"{part} {median[part + ' xla'] / median[part + ' plain']:5.2f}x"
                           for part in ("step", "attention"))
        print(f"  {clock:>4}: attention share of the step: {shares};  XLA / plain: {ratios}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=["llama"], choices=["llama", "gpt2"])
    parser.add_argument("--seq", nargs="+", type=int, default=[128, 1024])
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per step (batch x T)")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--n-layer", type=int, default=4)
    parser.add_argument("--n-head", type=int, default=8)
    parser.add_argument("--n-kv-head", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=4, help="alternating rounds per path")
    parser.add_argument("--repetitions", type=int, default=1, help="calls per path per round")
    args = parser.parse_args()
    import tensorflow as tf
    print(f"machine: {describe()}")
    print(f"TF {tf.__version__}, GPUs: {len(tf.config.list_physical_devices('GPU'))}; "
          f"d_model {args.d_model}, n_layer {args.n_layer}, n_head {args.n_head}, n_kv_head "
          f"{args.n_kv_head} (llama), float32, {args.tokens} tokens per step, {args.blocks} "
          f"alternating blocks x {args.repetitions} calls per path")
    for arch in args.arch:
        for steps in args.seq:
            report(arch, steps, args.tokens // steps, *measure(arch, steps, args))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
