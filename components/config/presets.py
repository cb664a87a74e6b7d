"""Presets: plain functions returning a Config (`--preset NAME`)."""

from __future__ import annotations

from components.config.tree import (Config, DataConfig, ExportConfig, ModelConfig, RuntimeConfig,
                                   TrainConfig)

def tiny() -> Config:
    """About 0.2M parameters: CPU tests and the README's default run. The recipe was chosen by
    benchmarks/recipe_sweep.py at the old default's training budget (2M tokens; docs/benchmarks.md,
    "Recipe"): the llama block on bytes, batches of 16 x 128 for 1000 steps (more updates beat
    bigger batches at this size) and the wsd schedule, 2.09 bits/byte against the old 3.00.
    Swept again under the whole-split order (2026-12-07): still ahead of every change at its
    training time (1.90 bits/byte on the eval files); d_model 96 or SentencePiece win only for
    1.3-1.6x its CPU.
    train.spike_rollback stays off here (its default): a run this short loses little to a spike,
    and the tests that train it compare exact weights. The larger presets turn it on.
    No int8 / TFLite variants: at this size both were larger or slower than float in every run
    (judged unfit to serve) and cost ~35 s of the ~180 s run (docs/benchmarks.md, "Main job");
    the other presets keep them, `--set export.quantize=[int8,tflite]` adds them here."""
    return Config(train=TrainConfig(global_batch_size=16, train_steps=1000, lr_schedule="wsd"),
                  export=ExportConfig(quantize=()), preset="tiny")


def cpu() -> Config:
    """About 0.8M parameters: a run of about 15 minutes on 2 CPU cores that beats lzma-9 on its
    own eval sample by a wide margin (docs/benchmarks.md, "Recipe"). Bytes, like the default, so
    its figures and compressor baselines compare with the default run's."""
    return Config(
        model=ModelConfig(n_layer=4, n_head=4, n_kv_head=2, d_model=128),
        train=TrainConfig(global_batch_size=32, train_steps=2400, learning_rate=3e-3,
                          min_learning_rate=3e-4, warmup_steps=60, lr_schedule="wsd",
                          checkpoint_every=400, log_every=50, spike_rollback=True),
        preset="cpu",
    )


def small() -> Config:
    """About 10M parameters: one GPU."""
    return Config(
        data=DataConfig(seq_len=512, train_shards=16, eval_shards=2),
        model=ModelConfig(n_layer=6, n_head=6, n_kv_head=2, d_model=384, dropout=0.1),
        train=TrainConfig(global_batch_size=64, train_steps=5000, learning_rate=1e-3,
                          min_learning_rate=1e-4, warmup_steps=200, checkpoint_every=500,
                          log_every=50, spike_rollback=True),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="small",
    )


def base() -> Config:
    """About 76M parameters (GPT-2 small's 12 x 768, 4 key/value heads): a multi-GPU machine."""
    return Config(
        data=DataConfig(seq_len=1024, train_shards=32, eval_shards=4),
        model=ModelConfig(n_layer=12, n_head=12, n_kv_head=4, d_model=768, dropout=0.1),
        train=TrainConfig(global_batch_size=256, accumulation_steps=4, train_steps=20000,
                          learning_rate=6e-4, min_learning_rate=6e-5, warmup_steps=1000,
                          checkpoint_every=1000, log_every=100, spike_rollback=True),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="base",
    )


def large() -> Config:
    """About 340M parameters: several GPUs, gradient accumulation."""
    return Config(
        data=DataConfig(seq_len=1024, train_shards=64, eval_shards=4),
        model=ModelConfig(n_layer=24, n_head=18, n_kv_head=6, d_model=1152, dropout=0.1),
        train=TrainConfig(global_batch_size=512, accumulation_steps=16, train_steps=50000,
                          learning_rate=3e-4, min_learning_rate=3e-5, warmup_steps=2000,
                          checkpoint_every=1000, log_every=100, spike_rollback=True),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="large",
    )


def xl() -> Config:
    """About 1.1B parameters (GPT-3 XL shape: 24 x 2048, 4 key/value heads, 2048 context, 32k SentencePiece
    vocabulary): more than one 80 GB device holds with AdamW at the global batch below, so it
    needs train.shard_optimizer_state or runtime.pipeline_stages (docs/training.md has the table)."""
    return Config(
        data=DataConfig(seq_len=2048, train_shards=128, eval_shards=8, tokenizer="sentencepiece",
                        vocab_size=32000),
        model=ModelConfig(n_layer=24, n_head=16, n_kv_head=4, d_model=2048, dropout=0.0),
        train=TrainConfig(global_batch_size=512, accumulation_steps=32, train_steps=100000,
                          learning_rate=2e-4, min_learning_rate=2e-5, warmup_steps=2000,
                          checkpoint_every=1000, log_every=100, remat="blocks",
                          spike_rollback=True),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="xl",
    )


PRESETS = {"tiny": tiny, "cpu": cpu, "small": small, "base": base, "large": large, "xl": xl}
