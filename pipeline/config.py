"""The one typed config tree of bigtrain.

A run is described by a frozen `Config` (data, model, train, eval, runtime, orchestrator, paths).
It is built from a preset (`tiny`, `small`, `base`, `large`: plain functions below), then an
optional YAML file, then dotted overrides (`train.learning_rate=3e-4`). Unknown keys and wrong types are rejected with a
message naming the key; cross-field rules are checked before anything runs. The resolved config is
written next to the run's artifacts (`save_config`).

This module imports nothing heavier than PyYAML: the CLI validates a config in milliseconds.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import hashlib
import json
import os
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

import yaml

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
DATA_FORMATS = ("text", "tfrecord")
TOKENIZERS = ("bytes", "sentencepiece")
TOKENIZER_MODEL_TYPES = ("unigram", "bpe")
# Byte fallback needs 256 byte pieces + pad, unk, bos, eos + at least one character.
MIN_SENTENCEPIECE_VOCAB = 261


class ConfigError(ValueError):
    """A config value, key or combination is invalid. The message names the key."""


@dataclass(frozen=True)
class DataConfig:
    # Raw input: a glob or a directory (all files below it). `<stdlib>` expands to the running
    # interpreter's standard library, the default corpus present on every machine.
    input: str = "<stdlib>/**/*.py"
    # fnmatch patterns of paths to leave out (third-party code is not the standard library).
    exclude: tuple[str, ...] = ("*/site-packages/*", "*/dist-packages/*")
    # `text`: raw text files, tokenized and packed by bigtrain's ExampleGen. `tfrecord`: already
    # tokenized gzip TFRecord shards under `input`/train/* and `input`/eval/* (imported as is).
    format: str = "text"
    # Model context length; every emitted sequence holds seq_len + 1 ids (inputs + shifted targets).
    seq_len: int = 128
    # Share of files sent to the eval split, decided by a hash of the file's relative path.
    eval_fraction: float = 0.05
    split_salt: str = ""
    train_shards: int = 4
    eval_shards: int = 1
    # Documents are grouped into this many buckets (by path hash) and packed per bucket; padding
    # happens only at the end of a bucket, so more buckets = more parallelism, a little more padding.
    pack_buckets: int = 8
    # Files larger than this are quarantined (reason `too_large`) instead of read into memory.
    max_file_bytes: int = 16_000_000
    # Tokenizer: `bytes` (UTF-8 bytes, 259 ids) or `sentencepiece`, trained by TokenizerGen on a
    # deterministic sample (by hash of document id) of the train split, byte fallback on.
    tokenizer: str = "bytes"
    # SentencePiece only (the byte tokenizer's vocabulary is fixed at 259 ids).
    vocab_size: int = 2000
    # `bpe` or `unigram`. BPE by default: on the stdlib corpus at 2000 pieces it trains ~6x faster
    # and packs more bytes per token (README, Tokenizers).
    tokenizer_model_type: str = "bpe"
    # UTF-8 bytes of train documents the tokenizer is trained on (the eval sample for its
    # bytes-per-token figure uses the same budget).
    tokenizer_sample_bytes: int = 8_000_000


@dataclass(frozen=True)
class ModelConfig:
    name: str = "gpt"
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 64
    # Hidden width of the MLP as a multiple of d_model.
    mlp_ratio: int = 4
    dropout: float = 0.0
    tie_embeddings: bool = True


@dataclass(frozen=True)
class TrainConfig:
    # Sequences per optimizer step, summed over replicas and micro-batches.
    global_batch_size: int = 32
    accumulation_steps: int = 1
    train_steps: int = 500
    learning_rate: float = 3e-3
    min_learning_rate: float = 3e-4
    warmup_steps: int = 30
    weight_decay: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    clip_norm: float = 1.0
    checkpoint_every: int = 100
    log_every: int = 20
    eval_batches: int = 20
    shuffle_buffer: int = 2048
    cache_dataset: bool = False
    seed: int = 1234


@dataclass(frozen=True)
class EvalConfig:
    # The Evaluator measures the exported SavedModel on the first max_batches x batch_size
    # sequences of the eval split (unshuffled, so candidate and baseline see the same data).
    batch_size: int = 64
    max_batches: int = 50
    # Absolute thresholds: a model above max_loss (nats/token) or below min_accuracy is rejected.
    max_loss: float = 3.0
    min_accuracy: float = 0.0
    # Relative gate: rejected when its loss exceeds the latest blessed model's by more than this.
    max_loss_regression: float = 0.02


@dataclass(frozen=True)
class RuntimeConfig:
    strategy: str = "mirrored"
    # With no GPU, `mirrored` splits the CPU into this many logical devices, so tests and CPU runs
    # exercise real replicas. Ignored when GPUs are present.
    cpu_replicas: int = 2
    precision: str = "float32"
    # Beam pipeline options for every Beam-based stage, e.g. ("--direct_running_mode=multi_processing",).
    beam_args: tuple[str, ...] = ("--direct_running_mode=in_memory", "--direct_num_workers=1")


@dataclass(frozen=True)
class OrchestratorConfig:
    """Where a scheduled pipeline runs (Kubeflow Pipelines, Airflow); local runs ignore this."""
    # Container image with bigtrain installed (see Dockerfile); every Kubeflow step runs in it.
    image: str = "bigtrain:0.1.0"
    # Artifacts of scheduled runs: an object-store URI (gs://, s3://) or a mounted volume path.
    pipeline_root: str = "/mnt/bigtrain/pipelines"
    # Pushed models of scheduled runs (<serving_dir>/<model name>/<version>/).
    serving_dir: str = "/mnt/bigtrain/serving"
    # Airflow: cron expression or preset, first logical date (YYYY-MM-DD), task retries.
    schedule: str = "@daily"
    start_date: str = "2026-01-01"
    retries: int = 1
    # Airflow: the MLMD sqlite file of scheduled runs (Kubeflow brings its own metadata store).
    metadata_path: str = "/mnt/bigtrain/metadata.sqlite"


@dataclass(frozen=True)
class PathsConfig:
    # All run state lives under home: pipeline artifacts, the MLMD database, the serving directory.
    home: str = "./bigtrain_home"
    pipeline_name: str = "bigtrain"


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    orchestrator: OrchestratorConfig = field(default_factory=OrchestratorConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    preset: str = "tiny"


# ----------------------------------------------------------------------------------------------
# Presets: plain functions returning a Config.


def tiny() -> Config:
    """About 0.2M parameters: CPU tests and the README's default run."""
    return Config(preset="tiny")


def small() -> Config:
    """About 11M parameters: one GPU."""
    return Config(
        data=DataConfig(seq_len=512, train_shards=16, eval_shards=2),
        model=ModelConfig(n_layer=6, n_head=6, d_model=384, dropout=0.1),
        train=TrainConfig(global_batch_size=64, train_steps=5000, learning_rate=1e-3,
                          min_learning_rate=1e-4, warmup_steps=200, checkpoint_every=500,
                          log_every=50),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="small",
    )


def base() -> Config:
    """About 85M parameters (GPT-2 small shape): a multi-GPU machine."""
    return Config(
        data=DataConfig(seq_len=1024, train_shards=32, eval_shards=4),
        model=ModelConfig(n_layer=12, n_head=12, d_model=768, dropout=0.1),
        train=TrainConfig(global_batch_size=256, accumulation_steps=4, train_steps=20000,
                          learning_rate=6e-4, min_learning_rate=6e-5, warmup_steps=1000,
                          checkpoint_every=1000, log_every=100),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="base",
    )


def large() -> Config:
    """About 380M parameters: several GPUs, gradient accumulation."""
    return Config(
        data=DataConfig(seq_len=1024, train_shards=64, eval_shards=4),
        model=ModelConfig(n_layer=24, n_head=18, d_model=1152, dropout=0.1),
        train=TrainConfig(global_batch_size=512, accumulation_steps=16, train_steps=50000,
                          learning_rate=3e-4, min_learning_rate=3e-5, warmup_steps=2000,
                          checkpoint_every=1000, log_every=100),
        runtime=RuntimeConfig(precision="mixed_bfloat16"),
        preset="large",
    )


PRESETS = {"tiny": tiny, "small": small, "base": base, "large": large}


# ----------------------------------------------------------------------------------------------
# Building a config: preset -> YAML -> --set overrides, all checked.


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """Return `value` as the field's type, or raise ConfigError naming `key`."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        if isinstance(value, str):
            value = [value] if value else []
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return tuple(value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads `3e-4` (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    raise ConfigError(f"{key}: unsupported field type {annotation!r}")  # pragma: no cover


def _unknown_key(key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown config key {key!r}{hint}; known here: {', '.join(sorted(known))}")


def _merge(obj: Any, updates: Mapping[str, Any], prefix: str = "") -> Any:
    """Return a copy of dataclass `obj` with nested `updates` applied, type-checked."""
    if not isinstance(updates, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {updates!r}")
    hints = typing.get_type_hints(type(obj))
    by_name = {f.name: f for f in fields(obj)}
    changes = {}
    for name, value in updates.items():
        key = prefix + str(name)
        if name not in by_name:
            raise _unknown_key(key, list(by_name))
        annotation = hints[name]
        current = getattr(obj, name)
        if dataclasses.is_dataclass(current):
            changes[name] = _merge(current, value, key + ".")
        else:
            changes[name] = _coerce(key, value, annotation)
    return replace(obj, **changes)


def parse_override(text: str) -> dict[str, Any]:
    """`train.learning_rate=3e-4` -> {"train": {"learning_rate": 3e-4}} (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form section.key=value")
    dotted, raw = text.split("=", 1)
    parts = dotted.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override {text!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not YAML (e.g. "@daily"): a plain string, type-checked like any value
    if value is None:
        value = raw
    nested: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        nested = {part: nested}
    return nested


def load_yaml(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        try:
            loaded = yaml.safe_load(fh) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return loaded


def build_config(preset: str = "tiny", yaml_path: str | None = None,
                 overrides: list[str] | tuple[str, ...] = (), *,
                 num_replicas: int | None = None) -> Config:
    """Preset, then YAML file, then dotted overrides; validated. Raises ConfigError."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    config = PRESETS[preset]()
    if yaml_path:
        loaded = load_yaml(yaml_path)
        loaded.pop("preset", None)
        config = _merge(config, loaded)
    for text in overrides:
        config = _merge(config, parse_override(text))
    validate(config, num_replicas=num_replicas)
    return config


def expected_replicas(config: Config) -> int:
    """Replicas the strategy will have on a machine without GPUs (the CLI's early check)."""
    if config.runtime.strategy == "mirrored":
        return config.runtime.cpu_replicas
    return 1


def validate(config: Config, num_replicas: int | None = None) -> None:
    """Cross-field checks that must fail before anything runs. Raises ConfigError."""
    d, m, t, r = config.data, config.model, config.train, config.runtime

    def positive(key: str, value: float) -> None:
        if value <= 0:
            raise ConfigError(f"{key}: must be > 0, got {value}")

    for key, value in [("data.seq_len", d.seq_len), ("data.train_shards", d.train_shards),
                       ("data.eval_shards", d.eval_shards), ("data.pack_buckets", d.pack_buckets),
                       ("data.max_file_bytes", d.max_file_bytes), ("model.n_layer", m.n_layer),
                       ("model.n_head", m.n_head), ("model.d_model", m.d_model),
                       ("model.mlp_ratio", m.mlp_ratio),
                       ("train.global_batch_size", t.global_batch_size),
                       ("train.accumulation_steps", t.accumulation_steps),
                       ("train.train_steps", t.train_steps),
                       ("train.learning_rate", t.learning_rate),
                       ("train.checkpoint_every", t.checkpoint_every),
                       ("train.log_every", t.log_every), ("train.eval_batches", t.eval_batches),
                       ("train.shuffle_buffer", t.shuffle_buffer),
                       ("runtime.cpu_replicas", r.cpu_replicas),
                       ("eval.batch_size", config.eval.batch_size),
                       ("eval.max_batches", config.eval.max_batches),
                       ("eval.max_loss", config.eval.max_loss)]:
        positive(key, value)
    if config.orchestrator.retries < 0:
        raise ConfigError(f"orchestrator.retries: must be >= 0, got {config.orchestrator.retries}")
    try:
        datetime.date.fromisoformat(config.orchestrator.start_date)
    except ValueError:
        raise ConfigError(f"orchestrator.start_date: {config.orchestrator.start_date!r} is not "
                          "YYYY-MM-DD") from None
    e = config.eval
    if not 0.0 <= e.min_accuracy <= 1.0:
        raise ConfigError(f"eval.min_accuracy: must be in [0, 1], got {e.min_accuracy}")
    if e.max_loss_regression < 0:
        raise ConfigError(f"eval.max_loss_regression: must be >= 0, got {e.max_loss_regression}")
    if not 0.0 < d.eval_fraction < 1.0:
        raise ConfigError(f"data.eval_fraction: must be in (0, 1), got {d.eval_fraction}")
    if d.format not in DATA_FORMATS:
        raise ConfigError(f"data.format: {d.format!r} is not one of {DATA_FORMATS}")
    if d.tokenizer not in TOKENIZERS:
        raise ConfigError(f"data.tokenizer: {d.tokenizer!r} is not one of {TOKENIZERS}")
    if d.tokenizer_model_type not in TOKENIZER_MODEL_TYPES:
        raise ConfigError(f"data.tokenizer_model_type: {d.tokenizer_model_type!r} is not one of "
                          f"{TOKENIZER_MODEL_TYPES}")
    if d.tokenizer_sample_bytes <= 0:
        raise ConfigError(f"data.tokenizer_sample_bytes: must be > 0, got {d.tokenizer_sample_bytes}")
    if d.tokenizer == "sentencepiece" and d.vocab_size < MIN_SENTENCEPIECE_VOCAB:
        raise ConfigError(f"data.vocab_size ({d.vocab_size}) is below the byte-fallback minimum "
                          f"{MIN_SENTENCEPIECE_VOCAB} (256 byte pieces + pad, unk, bos, eos + 1)")
    if r.strategy not in STRATEGIES:
        raise ConfigError(f"runtime.strategy: {r.strategy!r} is not one of {STRATEGIES}")
    if r.precision not in PRECISIONS:
        raise ConfigError(f"runtime.precision: {r.precision!r} is not one of {PRECISIONS}")
    if m.d_model % m.n_head:
        raise ConfigError(f"model.d_model ({m.d_model}) must be divisible by model.n_head ({m.n_head})")
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"model.dropout: must be in [0, 1), got {m.dropout}")
    if t.min_learning_rate > t.learning_rate:
        raise ConfigError(f"train.min_learning_rate ({t.min_learning_rate}) exceeds "
                          f"train.learning_rate ({t.learning_rate})")
    if t.warmup_steps < 0 or t.warmup_steps >= t.train_steps:
        raise ConfigError(f"train.warmup_steps ({t.warmup_steps}) must be in [0, train.train_steps "
                          f"= {t.train_steps})")
    replicas = num_replicas if num_replicas is not None else expected_replicas(config)
    per_step = replicas * t.accumulation_steps
    if t.global_batch_size % per_step:
        raise ConfigError(
            f"train.global_batch_size ({t.global_batch_size}) must be divisible by replicas "
            f"({replicas}) x train.accumulation_steps ({t.accumulation_steps}) = {per_step}")


# ----------------------------------------------------------------------------------------------
# Serialization: the resolved config travels as JSON (into TFX exec properties) and is saved as
# YAML next to the artifacts.


def to_dict(config: Any) -> dict[str, Any]:
    out = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def from_dict(cls: type, values: Mapping[str, Any]) -> Any:
    """Inverse of to_dict for any config dataclass (strict: unknown keys are errors)."""
    return _merge(cls(), values)


def section_json(section: Any) -> str:
    """Canonical JSON of one config section: the exact exec property a stage's cache keys on."""
    return json.dumps(to_dict(section), sort_keys=True)


def digest(config: Any) -> str:
    return hashlib.sha256(json.dumps(to_dict(config), sort_keys=True).encode()).hexdigest()[:16]


def save_config(config: Config, directory: str) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "config.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(to_dict(config), fh, sort_keys=False)
    return path
