"""The eval section (`eval`): what the Evaluator measures and gates on. Its named held-out sets
are heldout.py's; tree.py re-exports the section with the rest of the tree."""

from __future__ import annotations

from dataclasses import dataclass

from components.config.heldout import DEFAULT_SETS, HeldOutSetConfig


@dataclass(frozen=True)
class EvalConfig:
    # The Evaluator measures the exported SavedModel on the first max_batches x batch_size
    # sequences of the eval split (unshuffled, so candidate and baseline see the same data).
    batch_size: int = 64
    max_batches: int = 50
    # Exported variants (int8, TFLite: up to 15x slower than float on CPU) are measured on the
    # first variant_batches of those batches only (0 = all of them). Their loss delta vs float is
    # paired batch by batch on the same sequences, reported with its standard error; their other
    # figures are the float model's (whole sample) plus the paired difference. The rule for the
    # default: standard error <= 5e-4 (the delta resolved to 1e-3 at two standard errors), i.e.
    # (per-batch sd / 5e-4)^2 batches; the tiny preset's TFLite delta varies by 1.6e-3 from batch
    # to batch (int8: 0.6e-3), so 10 (docs/benchmarks.md, "Main job").
    variant_batches: int = 10
    # Absolute thresholds: a model above max_loss (nats/token) or below min_accuracy is rejected.
    max_loss: float = 3.0
    min_accuracy: float = 0.0
    # Relative gate: rejected when its loss exceeds the latest blessed model's by more than this.
    max_loss_regression: float = 0.02
    # A quantized variant whose loss exceeds the float model's (same sequences) by more than this
    # (nats/token) is marked not fit to serve.
    max_quantization_loss_delta: float = 0.05
    # ... and one larger on disk than max_variant_size_ratio x the float model's, or slower
    # (token_logits, one eval batch) than max_variant_latency_ratio x float's, is not recommended
    # either (components/serving/variants.py recommend; the latency allowance absorbs timer noise).
    max_variant_size_ratio: float = 1.0
    max_variant_latency_ratio: float = 1.1
    # Tokenizer-independent gates in bits per byte (total nats over the raw UTF-8 bytes of the
    # targets / ln 2), so models with different tokenizers compare fairly. max_bits_per_byte:
    # 0 = off; max_bits_per_byte_regression: < 0 = off. The nats/token gates above (max_loss,
    # max_loss_regression) apply to byte-level models only: a token of another vocabulary is
    # not the same unit.
    max_bits_per_byte: float = 0.0
    max_bits_per_byte_regression: float = -1.0
    # Whole documents (the report's standing line; components/evaluation/documents.py): the eval
    # documents with the smallest content keys, document_bytes in all (0 = off), each cut to its
    # first max_document_bytes, scored by the exported model with a sliding window (each target
    # after the first window sees at least stride_context ids of its document; -1 = half the
    # context) beside zlib-9 / lzma-9 on each document alone and on the set concatenated. The
    # default 256 KiB: about 20 files of the default corpus (the spread between files, not the
    # tokens, sets the figure's standard error: +/- 0.1 bits/byte at 11 files) for about the
    # model passes of the window sample (docs/benchmarks.md, "Main job").
    document_bytes: int = 262144
    max_document_bytes: int = 16384
    stride_context: int = -1
    # Named held-out sets (components/config/heldout.py), each scored like the whole documents
    # above with its own compressor figures and optional gates; their inputs are removed from
    # training by decontamination unless a set says decontaminate: false. The default: bigtrain's
    # own code, frozen (heldout.py says which and why). [] = none.
    sets: tuple[HeldOutSetConfig, ...] = DEFAULT_SETS
    # Code tasks (components/evaluation/tasks.py) on lines of the held-out set task_set ("" = the
    # first of eval.sets; none: no tasks): task_items next-line completions and 4-way multiple
    # choices (0 = off), chosen by content keys with task_seed; a model whose multiple-choice
    # accuracy is below min_task_choice_accuracy is not blessed (0 = off).
    task_items: int = 64
    task_set: str = ""
    task_seed: int = 0
    min_task_choice_accuracy: float = 0.0


# The settings that only decide (blessing, fitness to serve), never what is measured: a run that
# changes only these reuses the Evaluator's memoized measurements of the same model
# (components/evaluation/measure.py measurement_json) and decides again in seconds.
GATES = ("max_loss", "min_accuracy", "max_loss_regression", "max_quantization_loss_delta",
         "max_variant_size_ratio", "max_variant_latency_ratio", "max_bits_per_byte",
         "max_bits_per_byte_regression", "min_task_choice_accuracy")
