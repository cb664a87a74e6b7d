"""Model-parallel figures: the pipeline bubble against GPipe's theory, and sharded optimizer state's
step time against the unsharded step. Run through `python benchmarks/train_throughput.py
--model-parallel` (or this file directly); on CPU it splits the CPU into max(S, 2) logical
devices (`--stages 2` on a 2-core machine: one stage per core, the one setting a 2-core VM can
validate).

Bubble: with S stages and M micro-batches, GPipe's idle share of each device is
(S - 1) / (M + S - 1). Measured as 1 - M * (t1 / S) / t_step, where t1 is the one-device time of
forward + backward of one micro-batch through the whole model (so t1 / S is one stage's piece,
stages being equal) and t_step the pipelined step's time for M micro-batches: the share of the
S devices x t_step that no stage piece fills. Ops run one thread each (intra-op parallelism 1) so
that logical devices can run concurrently on separate cores; with fewer cores than stages they
cannot, and the measured bubble then reads near 1 - 1/S whatever the schedule (printed).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._machine import describe  # noqa: E402



def _timed(step, iterator, steps: int, warmup: int = 2) -> float:
    """Best seconds per step over `steps` steps after `warmup` (tracing) steps."""
    for _ in range(warmup):
        step(iterator)[0].numpy()
    best = float("inf")
    for _ in range(steps):
        start = time.perf_counter()
        step(iterator)[0].numpy()
        best = min(best, time.perf_counter() - start)
    return best


def _step(config):
    import keras
    import tensorflow as tf
    from components.training import loop
    from components.training.strategy import make_strategy
    from components.training.train_step import make_train_step
    from components.tokenizer.spec import token_spec
    t, T = config.train, config.data.seq_len
    strategy = make_strategy(config.runtime)
    keras.utils.set_random_seed(t.seed)
    model, state, optimizer, _ = loop.build_training(config, strategy)
    step = make_train_step(model, optimizer, strategy, state, global_batch_size=t.global_batch_size,
                           accumulation_steps=t.accumulation_steps, clip_norm=t.clip_norm,
                           dynamic_loss_scale=False, seed=t.seed,
                           pad_id=token_spec(config.data).pad_id,
                           gradient_fn=loop.pipeline_gradient_fn(config, model, state))
    ids = tf.random.uniform([t.global_batch_size, T + 1], 1, 250, tf.int32, seed=1)
    iterator = iter(tf.data.Dataset.from_tensors((ids[:, :-1], ids[:, 1:])).repeat())
    return step, iterator


def _config(*overrides):
    from components.config import build_config
    return build_config("tiny", overrides=[
        "data.seq_len=128", "model.n_layer=8", "model.d_model=128", "model.n_head=4",
        "train.train_steps=100", "train.warmup_steps=1", *overrides])


def bubble(steps: int, stages_list=(2, 4), micro_batches=(4, 8)) -> None:
    micro_batch = 4
    one = _config("runtime.strategy=one_device", f"train.global_batch_size={micro_batch}")
    t1 = _timed(*_step(one), steps)
    print(f"one device, one micro-batch of {micro_batch} x 128 tokens: {t1 * 1e3:.0f} ms")
    for stages in stages_list:
        for micro in micro_batches:
            config = _config("runtime.strategy=one_device", f"runtime.pipeline_stages={stages}",
                             f"train.accumulation_steps={micro}",
                             f"train.global_batch_size={micro * micro_batch}")
            t_step = _timed(*_step(config), steps)
            measured = 1 - micro * (t1 / stages) / t_step
            theory = (stages - 1) / (micro + stages - 1)
            print(f"S={stages} M={micro}: step {t_step * 1e3:.0f} ms, bubble measured "
                  f"{measured:.2f} vs GPipe theory {theory:.2f} (no overlap at all: "
                  f"{1 - 1 / stages:.2f})")


def sharded_vs_unsharded(steps: int, repeats: int = 3) -> None:
    base = ["runtime.strategy=mirrored", "train.global_batch_size=16"]
    plain = _step(_config(*base))
    sharded = _step(_config(*base, "train.shard_optimizer_state=true"))
    a = b = float("inf")
    for _ in range(repeats):                        # alternate, keep the best of each
        a = min(a, _timed(*plain, steps, warmup=1))
        b = min(b, _timed(*sharded, steps, warmup=1))
    print(f"mirrored, 2 replicas, d_model 128 x 8 layers: unsharded {a * 1e3:.0f} ms/step, "
          f"sharded optimizer state {b * 1e3:.0f} ms/step: {b / a:.3f}x (target <= 1.10x)")


def main(steps: int = 5, stages=(2, 4), micro_batches=(4, 8)) -> None:
    from components.training.strategy import ensure_cpu_replicas
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    devices = max(2, *stages)                      # 2: the sharded comparison's replicas
    ensure_cpu_replicas(devices)
    print(f"machine: {describe()}")
    print(f"devices: {devices} logical CPU devices on {os.cpu_count()} cores (no GPU in "
          f"this run); load average {os.getloadavg()[0]:.2f}")
    bubble(steps, stages, micro_batches)
    sharded_vs_unsharded(steps)


if __name__ == "__main__":
    main()
