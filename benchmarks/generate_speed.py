"""Decoding speed with and without the KV cache, side by side in one run.

Target: greedy decoding of 256 new tokens with the cache is at least 5x faster than the
full-window decoder (today's export: the whole context recomputed per token) for `small` on CPU.
Both paths are the exported graph functions (LanguageModelServer.decode, cached=True / False) on
the preset's float32 serving model with its own context length; EOS is masked so every run
produces exactly the requested tokens. Weights are the preset's random init (speed does not depend
on them). For `tiny` (context 128) 256 new tokens go past the window: a gpt2 model's cached path
re-fills its cache from the last 64 ids 3 times and the uncached one recomputes the window every
token; a llama model's cache slides one slot per token and the uncached one recomputes the whole
history with sliding-window attention every token (the sliding cache's definition).

Staggered batch: a batch whose rows fill their windows at different steps; only a sliding row
re-fills its cache (decoding.refill_rows, gpt2; a llama cache slides instead, so the refill cases
time the same) instead of re-running the prefill for the whole batch.
Measured side by side in one run: the aligned batch (every row slides at the same step), the
staggered batch with per-row refill, and the staggered batch with a whole-batch refill (decoding.merge of a full prefill), same tokens produced; and a batch with
one long row and 31 short ones, with ended rows skipped (decoding.step_rows) and, as the
baseline, still computed every step.

    .venv/bin/python benchmarks/generate_speed.py [--presets tiny small] [--new-tokens 256] [--batch 1]
    .venv/bin/python benchmarks/generate_speed.py --staggered [--batch 8] [--new-tokens 128]
    .venv/bin/python benchmarks/generate_speed.py --batch-sweep --presets tiny [--new-tokens 32]

Batch sweep (the figures behind components/serving/batching.py): greedy decoding of the same
number of new tokens (EOS masked) at batch 1, 4, 16 and 32 -- the batch sizes TF Serving's batcher
pads to -- per-request latency (best of 3) and rows per second, side by side in one process.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _machine import describe  # noqa: E402

TARGET = 5.0


def measure(preset: str, new_tokens: int, batch: int) -> dict:
    import tensorflow as tf
    from components.model.gpt import build_model, parameter_count
    from components.tokenizer.byte_level import EOS_ID, PAD_ID, VOCAB_SIZE, ByteTokenizer
    from components.serving.server import LanguageModelServer
    from components.config import build_config

    config = build_config(preset)
    context = config.data.seq_len
    tokenizer = ByteTokenizer()
    model = build_model(config.model, context, "float32", vocab_size=tokenizer.vocab_size)
    server = LanguageModelServer(model, context, max_new_tokens_limit=max(new_tokens, 1),
                                 tokenizer=tokenizer)
    banned = tf.logical_or(tf.equal(tf.range(VOCAB_SIZE), PAD_ID), tf.equal(tf.range(VOCAB_SIZE), EOS_ID))

    def choose(logits, i):
        return tf.argmax(tf.where(banned[None], -1e9, logits), axis=-1, output_type=tf.int32)

    prompts = tf.constant(["def main(args):\n    "] * batch)
    result = {"preset": preset, "context": context, "parameters": parameter_count(model)}
    for cached in (True, False):
        fn = tf.function(lambda p, n, c=cached: server.decode(p, n, choose, c), autograph=False)
        fn(prompts, tf.fill([batch], 2))                                   # trace + warm up
        start = time.perf_counter()
        text, produced = fn(prompts, tf.fill([batch], new_tokens))
        elapsed = time.perf_counter() - start
        assert int(tf.reduce_sum(produced)) == batch * new_tokens, produced
        result["cached" if cached else "uncached"] = batch * new_tokens / elapsed
        result["text_" + ("cached" if cached else "uncached")] = text.numpy().tolist()
    result["same_text"] = result["text_cached"] == result["text_uncached"]
    return result


def greedy_server(preset: str, new_tokens: int):
    """(server, choose, context): the preset's untrained float32 model behind the exported
    graph's LanguageModelServer, and greedy choice with PAD, BOS and EOS banned (every row runs
    to its limit)."""
    import tensorflow as tf
    from components.model import decoding
    from components.model.gpt import build_model
    from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer
    from components.serving.server import LanguageModelServer
    from components.config import build_config

    config = build_config(preset)
    context = config.data.seq_len
    tokenizer = ByteTokenizer()
    model = build_model(config.model, context, "float32", vocab_size=tokenizer.vocab_size)
    server = LanguageModelServer(model, context, max_new_tokens_limit=new_tokens, tokenizer=tokenizer)
    banned = tf.constant([PAD_ID, BOS_ID, EOS_ID])
    choose = lambda logits, i: tf.argmax(decoding.ban(logits, banned), axis=-1, output_type=tf.int32)
    return server, choose, context


def staggered(preset: str, new_tokens: int, batch: int) -> dict:
    """Seconds per request for each case (best of 3), the cases side by side in one process."""
    import tensorflow as tf
    from components.model import decoding

    server, choose, context = greedy_server(preset, new_tokens)
    aligned = ["x" * (context - 2)] * batch
    # Staggered: row r starts 4 r bytes (mod the window) short of a full window, so rows slide
    # at different steps. Ragged limits: one row decodes new_tokens, the others 4.
    stagger = ["x" * (context - 2 - (4 * r) % (context - 2)) for r in range(batch)]
    full, ragged = [new_tokens] * batch, [new_tokens] + [4] * (batch - 1)
    whole_batch = lambda model, window, lengths, rows, cache: decoding.merge(   # baseline
        rows, decoding.prefill(model, window, lengths)[1], cache)
    # Baseline: every row runs every step (ended rows' slots clamped: they no longer slide; so are
    # gpt2's positions, rows of a table of `context`).
    every_row = lambda model, token, position, cache, rows, slot: decoding.step(
        model, token, position if decoding.can_slide(model) else tf.minimum(position, context - 1),
        cache, slot=tf.minimum(slot, context - 1))
    cases = [("aligned", aligned, full, {}),
             ("staggered", stagger, full, {}),
             ("staggered, whole-batch refill", stagger, full, {"refill_rows": whole_batch}),
             ("1 long row, others end at 4", aligned, ragged, {}),
             ("1 long row, ended rows computed", aligned, ragged, {"step_rows": every_row})]
    result = {}
    for case, prompts, limits, patches in cases:
        originals = {name: getattr(decoding, name) for name in patches}
        for name, value in patches.items():
            setattr(decoding, name, value)
        try:
            fn = tf.function(lambda p, n: server.decode(p, n, choose), autograph=False)
            fn(tf.constant(prompts), tf.constant(limits))                    # trace + warm up
        finally:
            for name, value in originals.items():
                setattr(decoding, name, value)
        times = []
        for _ in range(3):                                                   # best of 3: shared CPU
            start = time.perf_counter()
            _, produced = fn(tf.constant(prompts), tf.constant(limits))
            times.append(time.perf_counter() - start)
        result[case] = min(times)
        assert int(tf.reduce_sum(produced)) == sum(limits), produced
    return result


def batch_sweep(preset: str, new_tokens: int, batches=(1, 4, 16, 32)) -> dict:
    """{batch: seconds per request (best of 3)} for greedy decoding through the exported graph
    function (LanguageModelServer.decode, cached), every row producing new_tokens tokens."""
    import tensorflow as tf

    server, choose, _ = greedy_server(preset, new_tokens)
    fn = tf.function(lambda p, n: server.decode(p, n, choose), autograph=False)
    result = {}
    for batch in batches:
        prompts, limits = tf.constant(["def main(args):\n    "] * batch), tf.fill([batch], new_tokens)
        fn(prompts, limits)                                                   # trace + warm up
        times = []
        for _ in range(3):                                                    # best of 3: shared CPU
            start = time.perf_counter()
            _, produced = fn(prompts, limits)
            times.append(time.perf_counter() - start)
        assert int(tf.reduce_sum(produced)) == batch * new_tokens, produced
        result[batch] = min(times)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "small"])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--staggered", action="store_true", help="the staggered-batch case only")
    parser.add_argument("--batch-sweep", action="store_true",
                        help="latency and rows/s at batch 1, 4, 16, 32 (TF Serving's allowed batch sizes)")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    if args.batch_sweep:
        for preset in args.presets:
            r = batch_sweep(preset, args.new_tokens)
            print(f"{preset}: greedy, {args.new_tokens} new tokens per row, float32, KV cache (best of 3)")
            print(f"  {'batch':>5} {'s / request':>12} {'rows/s':>8} {'x batch 1 latency':>18}")
            for batch, seconds in r.items():
                print(f"  {batch:>5} {seconds:>12.3f} {batch / seconds:>8.1f} {seconds / r[1]:>18.2f}")
        return 0
    if args.staggered:
        for preset in args.presets:
            r = staggered(preset, args.new_tokens, args.batch)
            print(f"{preset}: batch {args.batch}, {args.new_tokens} new tokens, greedy, float32 "
                  "(seconds per request)")
            for case, seconds in r.items():
                print(f"  {case:<32} {seconds:7.3f} s  {seconds / r['aligned']:5.2f}x aligned")
        return 0
    print(f"greedy decoding, {args.new_tokens} new tokens, batch {args.batch}, float32")
    print(f"{'preset':<8} {'params':>10} {'context':>8} {'no cache tok/s':>15} {'KV cache tok/s':>15} "
          f"{'ratio':>7}  same text")
    ok = True
    for preset in args.presets:
        r = measure(preset, args.new_tokens, args.batch)
        ratio = r["cached"] / r["uncached"]
        print(f"{preset:<8} {r['parameters']:>10,} {r['context']:>8} {r['uncached']:>15.1f} "
              f"{r['cached']:>15.1f} {ratio:>6.1f}x  {r['same_text']}", flush=True)
        if preset == "small":
            met = ratio >= TARGET
            ok = ok and met
            print(f"small: cache / no cache = {ratio:.1f}x (target >= {TARGET:g}x) -> {'MET' if met else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
