"""Training throughput and MFU of bigtrain's step, with the ratios that keep it honest, in one run.

    python benchmarks/train_throughput.py                          # CPU: d_model 64 and 256
    python benchmarks/train_throughput.py --preset small --precision mixed_bfloat16   # a GPU
    python benchmarks/train_throughput.py --preset base --precision mixed_bfloat16

Prints: the machine; the matmul peak measured here (FLOP/s of a chain of large tf.matmul by a
random orthogonal matrix in the run's compute dtype: operands never zero); per model: tokens/s and MFU of bigtrain's training loop, where
    MFU = tokens/s x FLOPs/token / measured matmul peak,
    FLOPs/token = 6 M + 4 M_frozen + 12 x n_layer x T x d_model   (gpt.flops_per_token; M =
    weights of trainable matmuls, M_frozen = of frozen ones: Dense kernels and the output head,
    not embedding lookups, biases or LayerNorms);
bigtrain's loop vs bare Keras `fit` on the same model and data (target >= 0.97); for the largest
model: accumulation k=4 vs k=1 at the same global batch (target time <= 1.05x), remat=blocks vs
none (time and peak memory), XLA on vs off (the runtime.xla=auto choice); the trace time and
graph size of the step for k=1 and k=16 (a while loop: independent of k).
`--input`: per-replica input vs a host-iterator baseline, d_model 256 on 2 CPU replicas
(benchmarks/input_feed.py: the training loop's InputFeed, each replica given only its share,
prefetched to its device, results fetched once per log window, against one host iterator of
global batches and a host sync every step; blocks alternated in one process).
`--arch`: the llama block (model.arch=llama, the default) vs the gpt2 block at d_model 256, tokens/s
and MFU of bigtrain's loop, alternated (target: llama within 10% of gpt2 on CPU).
`--model-parallel`: the pipeline bubble vs GPipe's (S-1)/(M+S-1) and sharded-state step time vs
unsharded (target <= 1.10x), on logical CPU devices (benchmarks/model_parallel.py).
Steady-state rates: the first steps (tracing, warm-up) are excluded; each comparison alternates
its two runs and keeps the best of each. Every rate is given per wall-clock second and per second
of this process's CPU time (MFU by CPU time = model FLOPs per CPU-second / matmul FLOPs per
CPU-second): on a shared machine the wall-clock figures move with other people's jobs, the
CPU-time ones much less.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402
from benchmarks._shards import write_random_shard  # noqa: E402

WARMUP_STEPS = 3
RENORM = 16   # matmul_chain: products between two rescalings of the operand


def matmul_chain(dtype: str, size: int):
    """(chain, q): chain(x, n) multiplies x by q n times; q is a random orthogonal matrix, so
    every product keeps the operand's norm and the operands stay non-zero for any n (a loop that
    scales by 1/size multiplies zero matrices after ~24 steps, which flatters a GPU's peak). In
    bfloat16 the rounding of q and of each product still drifts the norm (on an AMD EPYC: x0.43 in 300 products, so long chains would reach zero), so every RENORM products x is
    scaled back to its starting norm: size^2 elementwise ops per RENORM x 2 size^3 matmul FLOPs,
    negligible in the peak."""
    import tensorflow as tf
    q, _ = tf.linalg.qr(tf.random.stateless_normal([size, size], seed=[1, 2], dtype=tf.float32))
    q = tf.cast(q, dtype)

    @tf.function
    def chain(x, n):
        start_norm = tf.norm(tf.cast(x, tf.float32))
        for _ in tf.range(n // RENORM):
            for _ in range(RENORM):                    # unrolled: RENORM matmuls in a row
                x = tf.matmul(x, q)
            x = x * tf.cast(start_norm / tf.norm(tf.cast(x, tf.float32)), x.dtype)
        for _ in tf.range(n % RENORM):
            x = tf.matmul(x, q)
        return x
    return chain, q


def measure_matmul_peak(dtype: str, size: int, seconds: float = 3.0) -> float:
    """FLOP/s of repeated (size x size) @ (size x size) in `dtype`: the best of a few timed runs."""
    import tensorflow as tf
    chain, a = matmul_chain(dtype, size)

    chain(a, tf.constant(2)).numpy()
    n = 4
    while True:                                            # pick n so one run takes ~seconds/4
        start = time.perf_counter()
        chain(a, tf.constant(n)).numpy()
        if time.perf_counter() - start > seconds / 4:
            break
        n *= 2
    best = best_cpu = 0.0
    for _ in range(3):
        wall, cpu = clock()
        chain(a, tf.constant(n)).numpy()
        wall1, cpu1 = clock()
        best = max(best, 2.0 * size**3 * n / (wall1 - wall))
        best_cpu = max(best_cpu, 2.0 * size**3 * n / (cpu1 - cpu))
    return best, best_cpu


@dataclasses.dataclass
class Run:
    tokens_per_s: float
    seconds_per_step: float
    peak_bytes: float
    tokens_per_cpu_s: float = float("nan")   # per second of this process's CPU time


def clock() -> tuple[float, float]:
    """(wall, process CPU) seconds. On a shared machine other processes stretch the wall time of
    a run but not the CPU time it used: CPU-time rates are the steadier comparison there."""
    return time.perf_counter(), time.process_time()


def rates(stamps, steps: int, tokens_per_step: int, peak: float = float("nan")) -> Run:
    (wall0, cpu0), (wall1, cpu1) = stamps[WARMUP_STEPS - 1], stamps[-1]
    per_step = (wall1 - wall0) / steps
    return Run(tokens_per_step / per_step, per_step, peak, tokens_per_step * steps / (cpu1 - cpu0))


def peak_memory_reset(device: str) -> None:
    import tensorflow as tf
    try:
        tf.config.experimental.reset_memory_stats(device)
    except (ValueError, RuntimeError):
        pass


def peak_memory(device: str) -> float:
    import tensorflow as tf
    try:
        return float(tf.config.experimental.get_memory_info(device)["peak"])
    except (ValueError, RuntimeError):
        return float("nan")


def bigtrain_run(config, shard: str, workdir: str, steps: int, device: str) -> Run:
    """bigtrain's loop (loop.train) for WARMUP_STEPS + steps; steady-state rate. The loop calls
    on_step when it fetches a window's results (every log_every steps): log_every=WARMUP_STEPS
    makes the stamps of the last warm-up step and of the last step exact."""
    from components.storage import checkpoints
    from components.training import loop
    stamps = []
    peak_memory_reset(device)
    config = dataclasses.replace(config, train=dataclasses.replace(
        config.train, train_steps=WARMUP_STEPS + steps, checkpoint_every=10**6,
        log_every=WARMUP_STEPS, warmup_steps=1))
    run_dir = tempfile.mkdtemp(dir=workdir)
    loop.train(config, shard, os.path.join(run_dir, "run"), checkpoints.root(run_dir),
               on_step=lambda step, loss: stamps.append(clock()))
    return rates(stamps, steps, config.train.global_batch_size * config.data.seq_len,
                 peak_memory(device))


def input_path_main(args) -> None:
    """--input: old vs new input path, alternated in one process (benchmarks/input_feed.py)."""
    from benchmarks import input_feed
    input_feed.main(pairs=max(args.repeats, 12), batch=args.batch or 16)


def keras_fit_run(config, shard: str, steps: int, xla: bool) -> Run:
    """Bare Keras: the same GPT, data pipeline and AdamW through model.fit (no strategy)."""
    import keras

    from components.model.gpt import build_model
    from components.tokenizer.spec import token_spec
    from components.training import input as input_lib
    t, tokens = config.train, token_spec(config.data)
    keras.utils.set_random_seed(t.seed)
    keras.mixed_precision.set_dtype_policy("float32")
    model = build_model(config.model, config.data.seq_len, config.runtime.precision,
                        vocab_size=tokens.vocab_size)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=t.learning_rate,
                                                   weight_decay=t.weight_decay,
                                                   global_clipnorm=t.clip_norm),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                  ignore_class=tokens.pad_id),
                  jit_compile=xla)
    stamps = []

    class Stamp(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            stamps.append(clock())

    dataset = input_lib.make_dataset(shard, config.data.seq_len, t.global_batch_size,
                                     shuffle_buffer=t.shuffle_buffer, seed=t.seed)
    model.fit(dataset, epochs=1, steps_per_epoch=WARMUP_STEPS + steps, verbose=0,
              callbacks=[Stamp()])
    return rates(stamps, steps, t.global_batch_size * config.data.seq_len)


def trace_cost(config, shard: str, k: int) -> tuple[float, int]:
    """Seconds to trace bigtrain's step with k micro-batches, and its graph's node count."""
    import tensorflow as tf

    from components.training import input as input_lib
    from components.training import loop, train_step
    from components.tokenizer.spec import token_spec
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    config = dataclasses.replace(config, train=dataclasses.replace(
        config.train, accumulation_steps=k, global_batch_size=16 * k))
    model, state, optimizer, _ = loop.build_training(config, strategy)
    step = train_step.make_train_step(model, optimizer, strategy, state,
                                      global_batch_size=config.train.global_batch_size,
                                      accumulation_steps=k,
                                      clip_norm=1.0, dynamic_loss_scale=False,
                                      pad_id=token_spec(config.data).pad_id)
    iterator = iter(input_lib.make_dataset(shard, config.data.seq_len,
                                           config.train.global_batch_size))
    start = time.perf_counter()
    concrete = step.get_concrete_function(iterator)
    seconds = time.perf_counter() - start
    graph_def = concrete.graph.as_graph_def()
    return seconds, len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def model_configs(args):
    from components.config import build_config
    common = ["runtime.strategy=one_device", f"runtime.precision={args.precision}",
              "train.shuffle_buffer=64", "train.learning_rate=3e-4", "train.min_learning_rate=3e-5"]
    if args.preset == "cpu":
        return [
            ("d_model 64", build_config("tiny", overrides=[
                *common, "data.seq_len=128", "model.n_layer=4", "model.d_model=64", "model.n_head=4",
                "train.global_batch_size=32", "train.warmup_steps=1"])),
            ("d_model 256", build_config("tiny", overrides=[
                *common, "data.seq_len=128", "model.n_layer=4", "model.d_model=256", "model.n_head=4",
                f"train.global_batch_size={args.batch or 16}", "train.warmup_steps=1"])),
        ]
    batch = [f"train.global_batch_size={args.batch}"] if args.batch else []
    return [(args.preset, build_config(args.preset, overrides=[*common, "train.accumulation_steps=1",
                                                                *batch]))]


def arch_main(args) -> None:
    """--arch: the default llama block vs the gpt2 block, same width/depth/heads/data, alternated."""
    import tensorflow as tf

    from components.model.gpt import build_model, flops_per_token
    from components.tokenizer.spec import token_spec
    print(f"machine: {describe()}")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    device = "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"
    peak, peak_cpu = measure_matmul_peak("float32", 2048)
    base = dict(model_configs(args))["d_model 256"]
    configs = {arch: dataclasses.replace(base, model=dataclasses.replace(base.model, arch=arch))
               for arch in ("llama", "gpt2")}
    with tempfile.TemporaryDirectory() as workdir:
        shard = write_random_shard(os.path.join(workdir, "train-0.gz"), 256, base.data.seq_len)
        llama, gpt2 = side_by_side(
            lambda: bigtrain_run(configs["llama"], shard, workdir, args.steps, device),
            lambda: bigtrain_run(configs["gpt2"], shard, workdir, args.steps, device), args.repeats)
    for arch, run in (("llama", llama), ("gpt2", gpt2)):
        model = build_model(configs[arch].model, base.data.seq_len,
                            vocab_size=token_spec(base.data).vocab_size)
        flops = flops_per_token(model, base.data.seq_len)
        print(f"[{arch}] d_model 256, 4 layers, T={base.data.seq_len}: {run.tokens_per_s:,.0f} tokens/s, "
              f"{run.tokens_per_cpu_s:,.0f} tokens per CPU-second, {flops / 1e6:.2f} MFLOP/token, "
              f"MFU {run.tokens_per_s * flops / peak:.1%} wall, "
              f"{run.tokens_per_cpu_s * flops / peak_cpu:.1%} CPU-time")
    print(f"llama / gpt2 tokens/s: {llama.tokens_per_s / gpt2.tokens_per_s:.3f} wall, "
          f"{llama.tokens_per_cpu_s / gpt2.tokens_per_cpu_s:.3f} CPU-time (target >= 0.90)")


def side_by_side(first, second, repeats: int):
    """Alternate two measurements `repeats` times and keep each one's best (fastest) run: on a
    shared machine the noise is other processes, which only ever slow a run down."""
    a, b = [], []
    for _ in range(repeats):
        a.append(first())
        b.append(second())
    fastest = lambda runs: min(runs, key=lambda r: r.seconds_per_step)
    return fastest(a), fastest(b)


def with_train(config, **changes):
    return dataclasses.replace(config, train=dataclasses.replace(config.train, **changes))


def with_runtime(config, **changes):
    return dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, **changes))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=["cpu", "small", "base"], default="cpu")
    parser.add_argument("--precision", default="float32",
                        choices=["float32", "mixed_bfloat16", "mixed_float16"])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per measurement")
    parser.add_argument("--batch", type=int, default=0, help="global batch (default: preset's)")
    parser.add_argument("--repeats", type=int, default=2, help="alternated runs per comparison")
    parser.add_argument("--model-parallel", action="store_true",
                        help="only the model-parallel figures: pipeline bubble vs theory, sharded "
                             "optimizer state vs unsharded step time (benchmarks/model_parallel.py)")
    parser.add_argument("--stages", default="2,4",
                        help="--model-parallel: pipeline stage counts S to measure (comma list)")
    parser.add_argument("--micro-batches", default="4,8",
                        help="--model-parallel: micro-batch counts M to measure (comma list)")
    parser.add_argument("--input", action="store_true",
                        help="only the input figure: per-replica input vs a host-iterator baseline "
                             "(d_model 256, 2 CPU replicas)")
    parser.add_argument("--arch", action="store_true",
                        help="only llama vs gpt2 at d_model 256: tokens/s and MFU of bigtrain's loop")
    args = parser.parse_args(argv)
    if args.arch:
        arch_main(args)
        return
    if args.input:
        input_path_main(args)
        return
    if args.model_parallel:
        from benchmarks.model_parallel import main as model_parallel_main
        model_parallel_main(args.steps, stages=[int(s) for s in args.stages.split(",")],
                            micro_batches=[int(m) for m in args.micro_batches.split(",")])
        return

    import tensorflow as tf

    from components.model.gpt import build_model, flops_per_token, parameter_count
    from components.tokenizer.spec import token_spec
    from components.training.loop import use_xla
    gpus = tf.config.list_physical_devices("GPU")
    device = "GPU:0" if gpus else "CPU:0"
    print(f"machine: {describe()}")
    if gpus:
        print(f"device: {tf.config.experimental.get_device_details(gpus[0]).get('device_name', 'GPU')}")
    else:
        print("device: CPU only (no GPU in this run)")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"(> 0.5 per core means the figures were taken under shared load)")
    compute = {"float32": "float32", "mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}[args.precision]
    size = 8192 if gpus else 2048
    peak, peak_cpu = measure_matmul_peak(compute, size)
    print(f"matmul peak ({compute}, {size}x{size}, measured here): {peak / 1e9:.1f} GFLOP/s, "
          f"{peak_cpu / 1e9:.1f} GFLOP per CPU-second (measured again at the end; MFU uses the higher)")
    print(f"  peak method: a chain x <- x @ q of {size}x{size} matmuls, q a random orthogonal "
          f"matrix (non-zero operands at every step; x rescaled to its starting norm every "
          f"{RENORM} matmuls, {size}^2 elementwise ops against {RENORM} x 2 x {size}^3 FLOPs, "
          f"not counted), 2 x {size}^3 FLOPs per matmul, the best of a few timed runs")
    print("FLOPs/token = 6 M + 4 M_frozen + 12 x n_layer x T x d_model (forward + backward; M: "
          "matmul weights, i.e. Dense kernels and the output head, no lookups/biases/LayerNorms)")

    configs = model_configs(args)
    lines = []
    with tempfile.TemporaryDirectory() as workdir:
        shard = write_random_shard(os.path.join(workdir, "train-0.gz"), 256,
                                   configs[0][1].data.seq_len)
        last = None
        for name, config in configs:
            built = build_model(config.model, config.data.seq_len,
                                vocab_size=token_spec(config.data).vocab_size)
            n, flops = parameter_count(built), flops_per_token(built, config.data.seq_len)
            xla = use_xla(config.runtime)
            ours, fit = side_by_side(lambda: bigtrain_run(config, shard, workdir, args.steps, device),
                                     lambda: keras_fit_run(config, shard, args.steps, xla), args.repeats)
            lines.append((name, flops, ours, fit))
            print(f"\n[{name}] N={n:,} T={config.data.seq_len} batch={config.train.global_batch_size} "
                  f"{args.precision} XLA {'on' if xla else 'off'} (auto): "
                  f"{flops / 1e6:.1f} MFLOP/token")
            print(f"  bigtrain loop: {ours.tokens_per_s:,.0f} tokens/s ({ours.seconds_per_step * 1e3:.0f} ms/step), "
                  f"{ours.tokens_per_cpu_s:,.0f} tokens per CPU-second")
            print(f"  Keras fit:     {fit.tokens_per_s:,.0f} tokens/s, {fit.tokens_per_cpu_s:,.0f} tokens per CPU-second")
            print(f"  loop / fit throughput: {ours.tokens_per_s / fit.tokens_per_s:.3f} wall, "
                  f"{ours.tokens_per_cpu_s / fit.tokens_per_cpu_s:.3f} CPU-time (target >= 0.97)")
            last = (name, config, ours)

        name, config, ours = last
        print(f"\n[{name}] side by side, same global batch {config.train.global_batch_size}:")
        k1, k4 = side_by_side(
            lambda: bigtrain_run(config, shard, workdir, args.steps, device),
            lambda: bigtrain_run(with_train(config, accumulation_steps=4), shard, workdir, args.steps, device),
            args.repeats)
        print(f"  accumulation k=4 vs k=1: time per step {k4.seconds_per_step / k1.seconds_per_step:.3f}x"
              f" wall, {k1.tokens_per_cpu_s / k4.tokens_per_cpu_s:.3f}x CPU-time (target <= 1.05x); "
              f"peak memory {k4.peak_bytes / 2**20:.0f} MiB vs {k1.peak_bytes / 2**20:.0f} MiB")
        remat, plain = side_by_side(
            lambda: bigtrain_run(with_train(config, remat="blocks"), shard, workdir, args.steps, device),
            lambda: bigtrain_run(config, shard, workdir, args.steps, device), args.repeats)
        print(f"  remat=blocks vs none: time {remat.seconds_per_step / plain.seconds_per_step:.3f}x wall, "
              f"{plain.tokens_per_cpu_s / remat.tokens_per_cpu_s:.3f}x CPU-time, "
              f"peak memory {remat.peak_bytes / 2**20:.0f} MiB vs {plain.peak_bytes / 2**20:.0f} MiB")
        xla_on, xla_off = side_by_side(
            lambda: bigtrain_run(with_runtime(config, xla="on"), shard, workdir, args.steps, device),
            lambda: bigtrain_run(with_runtime(config, xla="off"), shard, workdir, args.steps, device),
            args.repeats)
        print(f"  XLA on vs off: {xla_on.tokens_per_s:,.0f} vs {xla_off.tokens_per_s:,.0f} tokens/s "
              f"({xla_on.tokens_per_s / xla_off.tokens_per_s:.3f}x wall, "
              f"{xla_on.tokens_per_cpu_s / xla_off.tokens_per_cpu_s:.3f}x CPU-time); runtime.xla=auto picks "
              f"{'on' if use_xla(config.runtime) else 'off'} on this device type")
        for k in (1, 16):
            seconds, nodes = trace_cost(configs[0][1], shard, k)
            print(f"  trace of the step, k={k:2d}: {seconds:.2f} s, {nodes} graph nodes"
                  + (" (k=1: no loop)" if k == 1 else " (one while-loop body for any k > 1)"))
    end_peak, end_peak_cpu = measure_matmul_peak(compute, size)
    peak, peak_cpu = max(peak, end_peak), max(peak_cpu, end_peak_cpu)
    print(f"\nmatmul peak, best of start and end: {peak / 1e9:.1f} GFLOP/s, "
          f"{peak_cpu / 1e9:.1f} GFLOP per CPU-second ({compute})")
    for name, flops, ours, fit in lines:
        target = "  (target >= 50% for d_model >= 256 on CPU)" if "256" in name else ""
        print(f"MFU [{name}] wall: bigtrain loop {ours.tokens_per_s * flops / peak:.1%}, "
              f"Keras fit {fit.tokens_per_s * flops / peak:.1%}{target}")
        print(f"MFU [{name}] CPU-time: bigtrain loop {ours.tokens_per_cpu_s * flops / peak_cpu:.1%}, "
              f"Keras fit {fit.tokens_per_cpu_s * flops / peak_cpu:.1%}")


if __name__ == "__main__":
    main()
