"""Cross-field rules of the config tree: what must fail before anything runs (each error names
the keys). Kept apart from tree.py, presets.py and loading.py so each stays one
screenful of concern; `build_config` applies them."""

from __future__ import annotations

import dataclasses
import datetime
import math

from components.config import bounds, heldout
from components.config.cluster import validate_cluster
from components.config.bounds import one_of
from components.config.mixture_rules import validate_shares, validate_sources
from components.config.strategy_rules import validate_parameter_server
from components.config.tracking import validate_tracking
from components.config.tune import TUNE_ALGORITHMS
from components.config.cleaning import (DECONTAMINATION_ACTIONS, EXAMPLES_PREFIX, HOME_PREFIX,
                                        NEAR_DEDUP_SHINGLES, QUALITY_FILTERS)
from components.config.tree import (ARCHS, MAX_ROTARY_POSITION, DATA_FORMATS, LR_SCHEDULES, DEDUP_MODES, DOCUMENT_MODES, EXPORT_VARIANTS,
                                    MIN_SENTENCEPIECE_VOCAB, NEWLINE_MODES, PUSH_FORMATS, VERSION_POLICIES,
                                    PRECISIONS, REMAT_MODES, SERVABLE_VARIANTS, STRATEGIES,
                                    TOKENIZER_MODEL_TYPES, TOKENIZERS, XLA_MODES, Config,
                                    ConfigError)


def finite(key: str, value: float) -> float:
    """Every config number is finite: NaN passes `value <= 0` and inf passes every bound."""
    if not math.isfinite(value):
        raise ConfigError(f"{key}: must be a finite number, got {value}")
    return value


def validate_finite(section, prefix: str = "") -> None:
    """Every float of the tree, tuples included (a config built in code skips the loader)."""
    for field in dataclasses.fields(section):
        key, value = prefix + field.name, getattr(section, field.name)
        if dataclasses.is_dataclass(value):
            validate_finite(value, key + ".")
        for i, item in enumerate(value if isinstance(value, tuple) else (value,)):
            if isinstance(item, float):
                finite(f"{key}[{i}]" if isinstance(value, tuple) else key, item)


def expected_replicas(config: Config) -> int:
    """Replicas the strategy will have on a machine without GPUs (the CLI's early check)."""
    if config.runtime.strategy == "mirrored":
        return config.runtime.cpu_replicas
    return 1


def validate(config: Config, num_replicas: int | None = None) -> None:
    """Cross-field checks that must fail before anything runs, section by section (the first
    broken rule raises ConfigError naming its keys)."""
    validate_finite(config)
    validate_positive(config)
    validate_orchestrator(config)
    validate_eval(config)
    validate_export(config)
    validate_data(config)
    validate_runtime(config)
    validate_model_and_train(config)
    bounds.validate_optimizer(config)
    bounds.validate_counts(config)
    bounds.validate_path_parts(config)
    if config.metadata.backend not in ("sqlite", "mysql"):
        raise ConfigError(f"metadata.backend: {config.metadata.backend!r} is not one of ('sqlite', 'mysql')")
    replicas = num_replicas if num_replicas is not None else expected_replicas(config)
    validate_batch(config, replicas)
    validate_tuning(config, replicas)
    validate_tracking(config.tracking, ConfigError)


def validate_positive(config: Config) -> None:
    """Every count, size and rate that must be > 0."""
    d, m, t, r = config.data, config.model, config.train, config.runtime
    for key, value in [("data.seq_len", d.seq_len), ("data.train_shards", d.train_shards),
                       ("data.eval_shards", d.eval_shards),
                       ("data.max_document_bytes", d.max_document_bytes),
                       ("data.range_bytes", d.range_bytes), ("model.n_layer", m.n_layer),
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
        if value <= 0:
            raise ConfigError(f"{key}: must be > 0, got {value}")
    if t.eval_every < 0 or (t.keep_best and not t.eval_every):
        raise ConfigError(f"train.eval_every: must be >= 0 (0 = no validation while training), "
                          f"and > 0 with train.keep_best (it picks among the validations); got "
                          f"{t.eval_every} with keep_best={t.keep_best}")
    if t.keep_best and t.eval_every > t.train_steps:
        raise ConfigError(f"train.eval_every: {t.eval_every} > train.train_steps {t.train_steps} "
                          f"with train.keep_best: no validation would run, so there is no best "
                          f"to keep (set eval_every <= train_steps, or keep_best false)")
    if r.peak_tflops_per_device < 0:
        raise ConfigError(f"runtime.peak_tflops_per_device: must be >= 0 (0 = unknown), got "
                          f"{r.peak_tflops_per_device}")


def validate_orchestrator(config: Config) -> None:
    if config.orchestrator.retries < 0:
        raise ConfigError(f"orchestrator.retries: must be >= 0, got {config.orchestrator.retries}")
    try:
        datetime.date.fromisoformat(config.orchestrator.start_date)
    except ValueError:
        raise ConfigError(f"orchestrator.start_date: {config.orchestrator.start_date!r} is not "
                          "YYYY-MM-DD") from None


def validate_eval(config: Config) -> None:
    e = config.eval
    if not 0.0 <= e.min_accuracy <= 1.0:
        raise ConfigError(f"eval.min_accuracy: must be in [0, 1], got {e.min_accuracy}")
    if e.variant_batches < 0:
        raise ConfigError(f"eval.variant_batches: must be >= 0 (0 = every eval batch), got "
                          f"{e.variant_batches}")
    if e.max_loss_regression < 0:
        raise ConfigError(f"eval.max_loss_regression: must be >= 0, got {e.max_loss_regression}")
    if e.max_bits_per_byte < 0:
        raise ConfigError(f"eval.max_bits_per_byte: must be >= 0 (0 = off), got {e.max_bits_per_byte}")
    if e.max_quantization_loss_delta < 0:
        raise ConfigError(f"eval.max_quantization_loss_delta: must be >= 0, got {e.max_quantization_loss_delta}")
    problem = heldout.set_problem(e.sets)
    if problem:
        raise ConfigError(problem)
    if e.task_set and e.task_set not in [s.name for s in e.sets]:
        raise ConfigError(f"eval.task_set: {e.task_set!r} is not one of eval.sets "
                          f"{[s.name for s in e.sets]}")
    if e.task_items < 0 or not 0.0 <= e.min_task_choice_accuracy <= 1.0:
        raise ConfigError(f"eval.task_items must be >= 0 (0 = off) and eval.min_task_choice_"
                          f"accuracy in [0, 1], got {e.task_items} and {e.min_task_choice_accuracy}")
    if e.min_task_choice_accuracy > 0 and (e.task_items == 0 or not e.sets):
        raise ConfigError(f"eval.min_task_choice_accuracy: {e.min_task_choice_accuracy} gates "
                          f"code tasks that never run (eval.task_items {e.task_items}, "
                          f"{len(e.sets)} eval.sets): set task_items and a set, or the gate to 0")
    if e.document_bytes < 0 or e.max_document_bytes < 1:
        raise ConfigError(f"eval.document_bytes must be >= 0 (0 = off) and eval.max_document_bytes "
                          f">= 1, got {e.document_bytes} and {e.max_document_bytes}")
    if not -1 <= e.stride_context < config.data.seq_len:
        raise ConfigError(f"eval.stride_context: must be -1 (half the context) or in [0, "
                          f"data.seq_len={config.data.seq_len}) (windows must advance), got "
                          f"{e.stride_context}")


def validate_export(config: Config) -> None:
    x = config.export
    for variant in x.quantize:
        one_of("export.quantize", variant, EXPORT_VARIANTS)
    if len(set(x.quantize)) != len(x.quantize):
        raise ConfigError(f"export.quantize: {list(x.quantize)} lists a variant twice")
    if x.serve not in SERVABLE_VARIANTS:
        raise ConfigError(f"export.serve: {x.serve!r} is not one of {SERVABLE_VARIANTS} (the TFLite "
                          "flatbuffer holds token_logits only, for on-device use; TF Serving needs a SavedModel)")
    if x.serve != "float" and x.serve not in x.quantize:
        raise ConfigError(f"export.serve: {x.serve!r} is not exported; add it to export.quantize "
                          f"(now {list(x.quantize)})")
    if x.max_new_tokens <= 0:
        raise ConfigError(f"export.max_new_tokens: must be > 0, got {x.max_new_tokens}")
    if config.model.arch == "llama" and config.data.seq_len + x.max_new_tokens > MAX_ROTARY_POSITION:
        raise ConfigError(f"export.max_new_tokens: {x.max_new_tokens} plus data.seq_len "
                          f"({config.data.seq_len}) must be at most {MAX_ROTARY_POSITION} for a "
                          "rotary (llama) model: served positions past that lose rotary precision")
    if config.push.keep_versions < 1:
        raise ConfigError(f"push.keep_versions: must be >= 1, got {config.push.keep_versions}")
    one_of("push.version_policy", config.push.version_policy, VERSION_POLICIES)
    for name in config.push.formats:
        one_of("push.formats", name, PUSH_FORMATS)


def validate_data(config: Config) -> None:
    d = config.data
    if not 0.0 < d.eval_fraction < 1.0:
        raise ConfigError(f"data.eval_fraction: must be in (0, 1), got {d.eval_fraction}")
    one_of("data.format", d.format, DATA_FORMATS)
    if not 1 <= d.gzip_level <= 9:
        raise ConfigError(f"data.gzip_level: must be in [1, 9], got {d.gzip_level}")
    one_of("data.document", d.document, DOCUMENT_MODES)
    one_of("data.dedup", d.dedup, DEDUP_MODES)
    one_of("data.newline", d.newline, NEWLINE_MODES)
    if d.document == "separator" and not d.separator:
        raise ConfigError("data.separator: must not be empty with data.document=separator")
    if d.format in ("jsonl", "parquet") and not d.text_field:
        raise ConfigError(f"data.text_field: must name the text field for data.format={d.format}")
    validate_sources(config)
    validate_shares(config)
    validate_tokenizer(config)
    validate_cleaning(config)


def validate_cleaning(config: Config) -> None:
    """data.near_dedup, data.filters, data.decontaminate."""
    n, q, c = config.data.near_dedup, config.data.filters, config.data.decontaminate
    if not 0.0 < n.threshold < 1.0:
        raise ConfigError(f"data.near_dedup.threshold: must be in (0, 1), got {n.threshold}")
    one_of("data.near_dedup.shingle", n.shingle, NEAR_DEDUP_SHINGLES)
    if n.num_perm < 2 or n.ngram < 1 or n.bands < 0 or n.bands > n.num_perm:
        raise ConfigError(f"data.near_dedup: num_perm ({n.num_perm}) must be >= 2, ngram "
                          f"({n.ngram}) >= 1, bands ({n.bands}) in [0, num_perm] (0 = derived)")
    for name in q.enabled:
        if name not in QUALITY_FILTERS:
            raise ConfigError(f"data.filters.enabled: unknown filter {name!r}; known: "
                              f"{', '.join(QUALITY_FILTERS)}")
    if q.min_words < 0 or q.max_words < q.min_words:
        raise ConfigError(f"data.filters: need 0 <= min_words ({q.min_words}) <= max_words "
                          f"({q.max_words})")
    if not 0 <= q.min_mean_word_length <= q.max_mean_word_length:
        raise ConfigError(f"data.filters: need 0 <= min_mean_word_length "
                          f"({q.min_mean_word_length}) <= max_mean_word_length "
                          f"({q.max_mean_word_length})")
    for key in ("max_symbol_ratio", "max_non_alpha_word_fraction", "max_duplicate_line_fraction",
                "max_top_ngram_fraction", "max_duplicate_ngram_fraction",
                "min_alphanumeric_fraction"):
        if not 0.0 <= getattr(q, key) <= 1.0:
            raise ConfigError(f"data.filters.{key}: must be in [0, 1], got {getattr(q, key)}")
    for key in ("top_ngram_n", "duplicate_ngram_n", "max_line_length", "max_mean_line_length"):
        if getattr(q, key) < 1:
            raise ConfigError(f"data.filters.{key}: must be >= 1, got {getattr(q, key)}")
    one_of("data.decontaminate.action", c.action, DECONTAMINATION_ACTIONS)
    if c.ngram < 1:
        raise ConfigError(f"data.decontaminate.ngram: must be >= 1, got {c.ngram}")
    if not 1 <= c.min_words <= c.ngram:
        raise ConfigError(f"data.decontaminate.min_words: must be in [1, ngram ({c.ngram})], "
                          f"got {c.min_words}")
    for pattern in c.eval_files:
        if not pattern or pattern in (HOME_PREFIX, EXAMPLES_PREFIX):
            raise ConfigError(f"data.decontaminate.eval_files: an entry is empty ({pattern!r}); "
                              f"give a glob, {HOME_PREFIX}<home path> or {EXAMPLES_PREFIX}<URI>")


def validate_tokenizer(config: Config) -> None:
    d = config.data
    one_of("data.tokenizer", d.tokenizer, TOKENIZERS)
    one_of("data.tokenizer_model_type", d.tokenizer_model_type, TOKENIZER_MODEL_TYPES)
    if d.tokenizer_sample_bytes <= 0:
        raise ConfigError(f"data.tokenizer_sample_bytes: must be > 0, got {d.tokenizer_sample_bytes}")
    if d.tokenizer == "sentencepiece" and d.format == "tfrecord":
        raise ConfigError("data.tokenizer=sentencepiece needs raw input (data.format text, jsonl "
                          "or parquet): data.format=tfrecord shards are already tokenized")
    # Checked whatever the tokenizer (issue 41: vocab_size=1 passed with the byte tokenizer, which
    # ignores it): a value no SentencePiece model can have is a mistake, not a no-op.
    if d.vocab_size < MIN_SENTENCEPIECE_VOCAB:
        ignored = ("" if d.tokenizer == "sentencepiece" else
                   f"; data.tokenizer={d.tokenizer} ignores it (its vocabulary is fixed at 259 ids)")
        raise ConfigError(f"data.vocab_size ({d.vocab_size}) is below the byte-fallback minimum "
                          f"{MIN_SENTENCEPIECE_VOCAB} (256 byte pieces + pad, unk, bos, eos + 1)"
                          + ignored)


def validate_runtime(config: Config) -> None:
    r = config.runtime
    one_of("runtime.strategy", r.strategy, STRATEGIES)
    one_of("runtime.precision", r.precision, PRECISIONS)
    one_of("runtime.xla", r.xla, XLA_MODES)
    validate_parameter_server(config)
    if r.device_memory_gb < 0:
        raise ConfigError(f"runtime.device_memory_gb: must be >= 0, got {r.device_memory_gb}")
    for name in ("sdk_worker_timeout_s", "sdk_worker_stall_s"):
        if not 0 < getattr(r, name) < float("inf"):  # NaN fails too
            raise ConfigError(f"runtime.{name}: must be a finite number of seconds > 0, "
                              f"got {getattr(r, name)}")
    validate_cluster(config, ConfigError)


def validate_model_and_train(config: Config) -> None:
    m, t = config.model, config.train
    one_of("train.remat", t.remat, REMAT_MODES)
    if t.input_streams < 0 or (t.input_streams and t.global_batch_size % t.input_streams):
        raise ConfigError(f"train.input_streams ({t.input_streams}) must be 0 (auto) or divide "
                          f"train.global_batch_size ({t.global_batch_size})")
    if t.max_consecutive_skipped < 1:
        raise ConfigError(f"train.max_consecutive_skipped: must be >= 1, got "
                          f"{t.max_consecutive_skipped}")
    if not t.spike_factor > 1.0:   # NaN fails too
        raise ConfigError(f"train.spike_factor: must be > 1 (a multiple of the median loss), "
                          f"got {t.spike_factor}")
    if t.spike_window < 1:
        raise ConfigError(f"train.spike_window: must be >= 1, got {t.spike_window}")
    if m.d_model % m.n_head:
        raise ConfigError(f"model.d_model ({m.d_model}) must be divisible by model.n_head ({m.n_head})")
    validate_arch(m)
    one_of("train.lr_schedule", t.lr_schedule, LR_SCHEDULES)
    if not 0.0 < t.decay_fraction <= 1.0:
        raise ConfigError(f"train.decay_fraction: must be in (0, 1], got {t.decay_fraction}")
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"model.dropout: must be in [0, 1), got {m.dropout}")
    if t.min_learning_rate > t.learning_rate:
        raise ConfigError(f"train.min_learning_rate ({t.min_learning_rate}) exceeds "
                          f"train.learning_rate ({t.learning_rate})")
    if t.warmup_steps < 0 or t.warmup_steps >= t.train_steps:
        raise ConfigError(f"train.warmup_steps ({t.warmup_steps}) must be in [0, train.train_steps "
                          f"= {t.train_steps})")


def validate_arch(m) -> None:
    """model.arch and the settings only the llama block has."""
    one_of("model.arch", m.arch, ARCHS)
    if m.n_kv_head < 0 or (m.n_kv_head and m.n_head % m.n_kv_head):
        raise ConfigError(f"model.n_kv_head ({m.n_kv_head}) must divide model.n_head ({m.n_head}) "
                          "(0 = n_head)")
    if m.arch == "gpt2" and m.n_kv_head not in (0, m.n_head):
        raise ConfigError(f"model.n_kv_head={m.n_kv_head} needs model.arch=llama: gpt2 is full "
                          "multi-head attention (0 or model.n_head)")
    if m.arch == "gpt2" and m.qk_norm:
        raise ConfigError("model.qk_norm=true needs model.arch=llama")
    if m.arch == "llama" and (m.d_model // m.n_head) % 2:
        raise ConfigError(f"model.arch=llama: the head width model.d_model / model.n_head = "
                          f"{m.d_model // m.n_head} must be even (rotary turns pairs of dimensions)")
    if m.rope_theta <= 0 or m.norm_eps <= 0 or m.mlp_hidden < 0:
        raise ConfigError(f"model.rope_theta ({m.rope_theta}) and model.norm_eps ({m.norm_eps}) "
                          f"must be > 0, model.mlp_hidden ({m.mlp_hidden}) >= 0 (0 = auto)")


def validate_batch(config: Config, replicas: int) -> None:
    t = config.train
    per_step = replicas * t.accumulation_steps
    if t.global_batch_size % per_step:
        raise ConfigError(
            f"train.global_batch_size ({t.global_batch_size}) must be divisible by replicas "
            f"({replicas}) x train.accumulation_steps ({t.accumulation_steps}) = {per_step}")
    validate_tuning(config, replicas)
    validate_model_parallel(config)


def validate_model_parallel(config: Config) -> None:
    """Model parallelism's settings. Supported: train.shard_optimizer_state with
    runtime.strategy=mirrored or multi_worker_mirrored (the slices are spread over every worker's replicas);
    runtime.pipeline_stages > 1 with runtime.strategy=one_device (the stages are the host's
    devices; no data parallel around them). Every other combination is a ConfigError naming the
    settings. (Whether the host has
    pipeline_stages devices is checked when the Trainer places the stages.)"""
    t, r, layers = config.train, config.runtime, config.model.n_layer
    if r.pipeline_stages < 1:
        raise ConfigError(f"runtime.pipeline_stages: must be >= 1 (1 = off), got {r.pipeline_stages}")
    if r.pipeline_stages > layers:
        raise ConfigError(f"runtime.pipeline_stages ({r.pipeline_stages}) exceeds model.n_layer "
                          f"({layers}): every stage needs at least one block")
    if r.pipeline_stages > 1 and r.strategy != "one_device":
        raise ConfigError(f"runtime.pipeline_stages={r.pipeline_stages} needs runtime.strategy="
                          f"one_device (the stages use the host's devices); combining it with "
                          f"runtime.strategy={r.strategy} (data parallel) is not supported yet")
    if t.shard_optimizer_state and r.strategy not in ("mirrored", "multi_worker_mirrored"):
        raise ConfigError(f"train.shard_optimizer_state=true needs runtime.strategy=mirrored or "
                          f"multi_worker_mirrored, got runtime.strategy={r.strategy}: one replica "
                          f"has nothing to shard across")


def validate_tuning(config: Config, replicas: int) -> None:
    """tune.* and the warm-start keys (train.init_from, train.freeze)."""
    tune, space, t, m = config.tune, config.tune.space, config.train, config.model
    if tune.trials < 0:
        raise ConfigError(f"tune.trials: must be >= 0, got {tune.trials}")
    one_of("tune.algorithm", tune.algorithm, TUNE_ALGORITHMS)
    if tune.steps_per_trial < 2 or tune.eval_batches <= 0:
        raise ConfigError(f"tune.steps_per_trial (>= 2) and tune.eval_batches (> 0): got "
                          f"{tune.steps_per_trial} and {tune.eval_batches}")
    for name in ("learning_rate", "dropout"):
        bounds = getattr(space, name)
        if bounds and (len(bounds) != 2 or not 0 <= bounds[0] <= bounds[1]):
            raise ConfigError(f"tune.space.{name}: expected [low, high] with 0 <= low <= high, "
                              f"got {list(bounds)}")
    if space.learning_rate and space.learning_rate[0] <= 0:
        raise ConfigError(f"tune.space.learning_rate: log-uniform needs low > 0, got {space.learning_rate[0]}")
    if space.dropout and space.dropout[1] >= 1:
        raise ConfigError(f"tune.space.dropout: must be below 1, got {space.dropout[1]}")
    for name in ("warmup_steps", "d_model", "n_layer", "accumulation_steps"):
        if any(v < (0 if name == "warmup_steps" else 1) for v in getattr(space, name)):
            raise ConfigError(f"tune.space.{name}: invalid choice in {list(getattr(space, name))}")
    for width in space.d_model:
        if width % m.n_head or (m.arch == "llama" and (width // m.n_head) % 2):
            raise ConfigError(f"tune.space.d_model: {width} is not divisible by model.n_head "
                              f"({m.n_head})" + (" into even head widths (rotary)" if m.arch == "llama" else ""))
    for k in space.accumulation_steps:
        if t.global_batch_size % (replicas * k):
            raise ConfigError(f"tune.space.accumulation_steps: train.global_batch_size "
                              f"({t.global_batch_size}) is not divisible by {replicas} replicas x {k}")
    if not t.init_from.strip():
        raise ConfigError("train.init_from: empty; use none, latest_blessed, a path or hf:DIR")
    if t.init_from.startswith("hf:") and not t.init_from[len("hf:"):].strip():
        raise ConfigError("train.init_from=hf:DIR: no directory after hf: (a Hugging Face model "
                          "directory: config.json, model.safetensors, tokenizer files)")
    for item in t.freeze:
        blocks = item[len("blocks:"):] if item.startswith("blocks:") else None
        if item != "embeddings" and not (blocks and blocks.isdigit() and 0 < int(blocks) <= m.n_layer):
            raise ConfigError(f"train.freeze: {item!r} is not `embeddings` or `blocks:N` with "
                              f"1 <= N <= model.n_layer ({m.n_layer})")
    if t.freeze and t.init_from == "none":
        raise ConfigError("train.freeze needs train.init_from (freezing random weights trains nothing)")
