"""The CPU cost of one serving export, with `generate` and `sample` sharing one traced decoding
loop (today's LanguageModelServer._sampling_decode) against `generate` tracing a loop of its own
(the export before 2026-11-28), side by side in one process, float and int8.

Target: the shared loop costs at most 0.9x the CPU-s of the other, for each variant. The loop
traces the model 4-5 times (prefill, step, the steps of ended rows, refill), which is why an
export that traces it once instead of twice saves most where the model's ops are most (int8's
dequantizing matmuls).

    .venv/bin/python benchmarks/export_cost.py [--layers 2] [--width 64] [--repeats 3]

Each (mode, variant) is exported `repeats` times, the modes alternating; the median CPU-s (user +
sys of this process) per export is compared (the first export of a process also pays TensorFlow's
one-time set-up, so the modes alternate rather than run in blocks).
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _machine import cpu_seconds, describe  # noqa: E402

TARGET = 0.9


def generate_with_its_own_loop(server, prompt, max_new_tokens, cached=True):
    """`generate` as it was before the shared loop: greedy choice, its own decode trace."""
    import tensorflow as tf
    from components.serving import inputs
    limit = inputs.checked_max_new_tokens(max_new_tokens, tf.shape(prompt)[0],
                                          server.max_new_tokens_limit)

    def choose(logits, i):
        return tf.argmax(server._never(logits), axis=-1, output_type=tf.int32)
    return server._text_outputs(*server.decode(prompt, limit, choose, cached))


def measure(layers: int, width: int, repeats: int) -> dict:
    from components.common.heap import heap_frozen
    from components.config import ModelConfig
    from components.model.gpt import build_model
    from components.serving.export import write_serving_model
    from components.serving.server import LanguageModelServer
    from components.serving.variants import int8_copy
    from components.tokenizer.byte_level import VOCAB_SIZE, ByteTokenizer
    config = ModelConfig(arch="llama", n_layer=layers, n_head=4, d_model=width, n_kv_head=4)
    context = 64
    float_model = build_model(config, context, vocab_size=VOCAB_SIZE)
    models = {"float": float_model, "int8": int8_copy(float_model, config, context)}
    shared = LanguageModelServer.generate
    seconds = {}
    try:
        with tempfile.TemporaryDirectory() as out:
            for repeat in range(repeats):
                for mode in ("own loop", "shared loop"):
                    LanguageModelServer.generate = generate_with_its_own_loop if mode == "own loop" else shared
                    for variant, model in models.items():
                        started = cpu_seconds()
                        with heap_frozen():
                            write_serving_model(model, context, os.path.join(out, f"{mode}-{variant}-{repeat}"),
                                                tokenizer=ByteTokenizer())
                        seconds.setdefault((mode, variant), []).append(cpu_seconds() - started)
    finally:
        LanguageModelServer.generate = shared
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(describe())
    seconds = measure(args.layers, args.width, args.repeats)
    median = {key: sorted(values)[len(values) // 2] for key, values in seconds.items()}
    met = True
    for variant in ("float", "int8"):
        own, shared = median[("own loop", variant)], median[("shared loop", variant)]
        ratio = shared / own
        met &= ratio <= TARGET
        print(f"{variant:5s}: own loop {own:.2f} CPU-s, shared loop {shared:.2f} CPU-s per export "
              f"(median of {args.repeats}): {ratio:.2f}x (target <= {TARGET}x)")
    print("target met" if met else "target NOT met")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
