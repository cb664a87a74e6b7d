"""The one typed config tree of bigtrain: frozen dataclasses, one per section.

A run is described by a frozen `Config` (data, model, train, eval, export, push, runtime,
orchestrator, paths, metadata, tune, tracking). Presets (presets.py) build one; loading.py applies
a YAML file and dotted `--set` overrides (unknown keys and wrong types are errors naming the key);
rules.py holds the cross-field rules. `bigtrain run` writes the resolved config into the run's
folder of the home, `<home>/runs/<run id>/config.yaml` (`save_config`; runners/local/home.py).

This package imports nothing heavier than PyYAML: the CLI validates a config in milliseconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from components.config.cluster import CLUSTERS, RayConfig  # noqa: F401  (runtime.cluster, runtime.ray)
# The data section's cleaning sub-sections (re-exported: the whole tree is importable from here).
from components.config.cleaning import (DECONTAMINATION_ACTIONS, NEAR_DEDUP_SHINGLES,  # noqa: F401
                                        QUALITY_FILTERS, DecontaminationConfig, NearDedupConfig,
                                        QualityFilterConfig, EXAMPLES_PREFIX, HOME_PREFIX)
# A mixture's named sources (data.sources), likewise.
from components.config.sources import DEFAULT_SOURCE, SourceConfig  # noqa: F401
# The eval section (its named held-out sets in heldout.py), likewise.
from components.config.evaluation import EvalConfig  # noqa: F401
from components.config.heldout import DEFAULT_SETS, HeldOutSetConfig  # noqa: F401
# The tracking section (MLflow, W&B, TensorBoard), likewise.
from components.config.tracking import TRACKING_BACKENDS, TrackingConfig  # noqa: F401
# The tune section (the Tuner's trials and search space), likewise.
from components.config.tune import TUNE_ALGORITHMS, TuneConfig, TuneSpaceConfig  # noqa: F401

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "parameter_server")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
DATA_FORMATS = ("text", "jsonl", "parquet", "tfrecord")
DOCUMENT_MODES = ("file", "record", "separator")
DEDUP_MODES = ("exact", "near", "none")
NEWLINE_MODES = ("normalize", "keep")
REMAT_MODES = ("none", "blocks")
ARCHS = ("gpt2", "llama")
# A rotary (llama) model's served positions reach data.seq_len + export.max_new_tokens (its cache
# slides; positions keep counting); past 2^16 the float32 rotary angles lose precision. The one
# bound: config rules check it, the serving graph refuses it (components/serving/server.py).
MAX_ROTARY_POSITION = 2**16
LR_SCHEDULES = ("cosine", "wsd")
XLA_MODES = ("auto", "on", "off")
ON_OFF_KEYS = ("runtime.xla",)  # string settings whose values include on/off
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
    # `text`: raw text files (any size; .gz streamed), tokenized and packed by bigtrain's
    # ExampleGen. `jsonl`: JSON Lines (.jsonl/.json, optionally .gz), text in `text_field`.
    # `parquet`: Parquet files, text in column `text_field`, streamed by row group. `tfrecord`:
    # already tokenized gzip TFRecord shards under `input`/train/* and `input`/eval/* (imported).
    format: str = "text"
    # What one document is (format text): `file` (a whole file), `record` (a line), `separator`
    # (text between occurrences of `separator`). jsonl and parquet: always one record (line / row).
    document: str = "file"
    # Document separator for data.document=separator, e.g. "\n\n" (a blank line) or "<|endoftext|>".
    separator: str = "\n\n"
    # JSON field / Parquet column holding the text (jsonl, parquet).
    text_field: str = "text"
    # A larger document is quarantined (reason `too_large`, with its location); memory per worker
    # is bounded by about this plus one read block.
    max_document_bytes: int = 16_000_000
    # Work unit size: large uncompressed text/JSONL files are read in byte ranges of this size in
    # parallel (aligned to separators / lines); small files are batched up to this size.
    range_bytes: int = 16_000_000
    # zlib level of the gzip shards: 1 (fastest) .. 9 (smallest). 1 deflates faster than zlib's
    # default 6 for slightly larger shards (docs/benchmarks.md, "Data stage": 355 MiB against 347).
    gzip_level: int = 1
    # Model context length; every emitted sequence holds seq_len + 1 ids (inputs + shifted targets).
    seq_len: int = 128
    # Share of documents sent to the eval split, decided by a hash of the document's normalized
    # text (exact duplicates share a split; components/corpus/documents.py).
    eval_fraction: float = 0.05
    split_salt: str = ""
    # `exact`: documents with the same normalized text (components/corpus/documents.py) are
    # packed once, the others counted as documents_skipped_duplicate; `near`: exact, then
    # near-duplicates (MinHash LSH, data.near_dedup) packed once per cluster, the others counted
    # as documents_skipped_near_duplicate; `none`: all are packed (they still share a split:
    # the split is by content).
    dedup: str = "exact"
    # CRLF in data.document=separator and record modes: `normalize` turns every CRLF into LF
    # before the text is split or packed (a CRLF file then splits on a separator written with
    # \n, and record lines lose their \r); `keep` packs the bytes as they are. The file mode
    # always keeps the bytes.
    newline: str = "normalize"
    train_shards: int = 4
    eval_shards: int = 1
    # Tokenizer: `bytes` (UTF-8 bytes, 259 ids) or `sentencepiece`, trained by TokenizerGen on a
    # deterministic sample (by hash of document id) of the train split, byte fallback on.
    tokenizer: str = "bytes"
    # SentencePiece only (the byte tokenizer's vocabulary is fixed at 259 ids); >= 261 with either.
    vocab_size: int = 2000
    # `bpe` or `unigram`. BPE by default: on the stdlib corpus at 2000 pieces it trains ~6x faster
    # and packs more bytes per token (docs/benchmarks.md, "Tokenizers").
    tokenizer_model_type: str = "bpe"
    # UTF-8 bytes of train documents the tokenizer is trained on (the eval sample for its
    # bytes-per-token figure uses the same budget).
    tokenizer_sample_bytes: int = 8_000_000
    # A mixture: named sources, each with its own input, reading settings and weight (epochs) or
    # share (of the train tokens; one or the other per mixture, docs/data.md). Empty: one
    # source named `default` made of data.input, exclude, format, document, separator and
    # text_field with weight 1 (those six settings are not read when sources are given).
    sources: tuple[SourceConfig, ...] = ()
    # data.dedup=near: MinHash LSH settings (components/corpus/minhash.py).
    near_dedup: NearDedupConfig = field(default_factory=NearDedupConfig)
    # Heuristic quality filters (components/corpus/quality.py): none enabled by default.
    filters: QualityFilterConfig = field(default_factory=QualityFilterConfig)
    # Evaluation text kept out of training (components/corpus/contamination.py).
    decontaminate: DecontaminationConfig = field(default_factory=DecontaminationConfig)

    def mixture(self) -> tuple[SourceConfig, ...]:
        """The sources this config reads: data.sources, or the one source data.input stands for.
        The one place the shorthand becomes a source (the listing, the data stage, the screen and
        the local runner read the sources here; the mixture's rules check `data.sources` alone).
        Where the shorthand must differ from a one-source mixture, the code asks `data.sources`
        itself: the setting an error names, and the fingerprint and input signature kept as they
        were before mixtures (components/storage/listing.py), and the `input` the Examples record
        (components/text_example_gen/component.py)."""
        if self.sources:
            return self.sources
        return (SourceConfig(name=DEFAULT_SOURCE, input=self.input, exclude=self.exclude,
                             format=self.format, document=self.document,
                             separator=self.separator, text_field=self.text_field),)


@dataclass(frozen=True)
class ModelConfig:
    name: str = "gpt"
    # The decoder block (components/model/): `llama` = rotary positions, RMSNorm, SwiGLU MLP,
    # grouped-query attention, no biases; `gpt2` = learned positions, LayerNorm, GELU MLP, full
    # multi-head attention (the block of bigtrain's models before the modern one; their
    # checkpoints and warm starts need it).
    arch: str = "llama"
    n_layer: int = 4
    n_head: int = 4
    # Key/value heads of grouped-query attention (llama): must divide n_head; 0 = n_head (full
    # multi-head). gpt2 is always full multi-head (0 or n_head only).
    n_kv_head: int = 0
    d_model: int = 64
    # Hidden width of the MLP as a multiple of d_model (gpt2: mlp_ratio x d_model). llama's
    # SwiGLU has three matrices instead of two: 2/3 x mlp_ratio x d_model rounded up to a
    # multiple of 32 (the same parameter count; 8/3 d_model at ratio 4), unless mlp_hidden > 0.
    mlp_ratio: int = 4
    mlp_hidden: int = 0
    # llama: rotary base (angle of pair i at position p = p x rope_theta^(-2i/D)), the RMSNorm
    # epsilon, and QK-norm (an RMSNorm on every query and key head before the rotation).
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    qk_norm: bool = False
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
    # `cosine`: linear warmup, then cosine decay from learning_rate to min_learning_rate at the
    # last step. `wsd` (warmup-stable-decay): linear warmup, learning_rate held until the last
    # decay_fraction of train_steps, then a 1 - sqrt decay to min_learning_rate at the last step.
    lr_schedule: str = "cosine"
    decay_fraction: float = 0.2
    weight_decay: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    clip_norm: float = 1.0
    checkpoint_every: int = 100
    log_every: int = 20
    # Validation while training (components/training/validation.py): every eval_every steps
    # (0 = off) the model is scored on the first eval_batches x eval.batch_size sequences of the
    # evaluation sample (the same ones each time, and after a resume); logged to the console,
    # TensorBoard and the UI's curves. The default: 4 validations of the tiny run's 1000 steps,
    # 640 sequences each (~1/5 of the final evaluation's 3,200). keep_best: export the weights of
    # the best validation instead of the last step's.
    eval_every: int = 250
    eval_batches: int = 10
    keep_best: bool = False
    shuffle_buffer: int = 2048
    # Input streams S (components/training/input.py): train file i feeds stream i mod S, each
    # stream shuffled on its own (shuffle_buffer records each), and every global batch takes
    # B / S rows from each stream. The batches do not depend on the replica or worker count, and
    # a worker reads only the streams under its rows (1/W of the files when W divides S).
    # 0 = auto: the largest divisor of global_batch_size within the number of train files.
    # Must divide global_batch_size; at most the number of non-empty train files.
    input_streams: int = 0
    cache_dataset: bool = False
    seed: int = 1234
    # Gradient checkpointing: `blocks` recomputes each Transformer block in the backward pass
    # (activation memory ~ one block instead of all; ~1/3 more compute).
    remat: str = "none"
    # Consecutive non-finite (skipped) steps after which the run stops with an error (with
    # spike_rollback: after which it rolls back).
    max_consecutive_skipped: int = 50
    # Loss-spike rollback (docs/training.md, "Loss spikes"): a finite loss above spike_factor x
    # the median of the last spike_window losses, or max_consecutive_skipped non-finite steps in
    # a row, restores the last checkpoint and skips the batches read since it.
    spike_rollback: bool = False
    spike_factor: float = 2.0
    spike_window: int = 50
    # AdamW decays Dense kernels always, biases and LayerNorms never, embeddings when this is true.
    decay_embeddings: bool = True
    # Warm start (fine-tuning): `none`, `latest_blessed` (the newest blessed Model in MLMD) or a
    # path (a Model artifact, a SavedModel or a TF checkpoint), or `hf:DIR` (a Hugging Face
    # directory: GPT2LMHeadModel, LlamaForCausalLM or Qwen3ForCausalLM; docs/serving.md). Shapes
    # must match this config.
    init_from: str = "none"
    # Weights kept fixed while fine-tuning: `embeddings` (token + position; with tied embeddings
    # this also fixes the output head) and/or `blocks:N` (the lowest N transformer blocks).
    freeze: tuple[str, ...] = ()
    # ZeRO stage 1: each data-parallel replica keeps the AdamW moments of its own 1/R slice of the
    # parameters (optimizer state 8 N -> 8 N / R bytes per replica). runtime.strategy=mirrored only.
    shard_optimizer_state: bool = False


EXPORT_VARIANTS = ("int8", "tflite")
SERVABLE_VARIANTS = ("float", "int8")


@dataclass(frozen=True)
class ExportConfig:
    # Variants written beside the float serving SavedModel and evaluated on the same sequences:
    # `int8` (Keras model.quantize("int8") weights, same signatures) and `tflite` (token_logits as a
    # TFLite flatbuffer, dynamic-range quantized).
    quantize: tuple[str, ...] = EXPORT_VARIANTS
    # The variant the Pusher pushes (only when the Evaluator blesses it): `float` or `int8`.
    serve: str = "float"
    # Largest max_new_tokens generate/sample accept; larger requests are InvalidArgument errors.
    max_new_tokens: int = 4096


VERSION_POLICIES = ("specific", "latest")
PUSH_FORMATS = ("hf",)


@dataclass(frozen=True)
class PushConfig:
    """The Pusher's deployment files next to the pushed versions (components/push/deployment.py)."""
    # Versions kept under <serving_dir>/<model>/: the newest keep_versions and every labelled one.
    keep_versions: int = 5
    # models.config's version policy: `specific` (the versions labelled stable and canary) or
    # `latest` (the newest version only; no labels).
    version_policy: str = "specific"
    # Extra formats written inside each pushed version, under the same never-half-visible rule:
    # `hf` (the Hugging Face layout in <version>/hf/, float32; components/serving/hf).
    formats: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuntimeConfig:
    strategy: str = "mirrored"
    # With no GPU, `mirrored` splits the CPU into this many logical devices (one replica each).
    # 1, the default: one replica per real device, the fastest on a CPU-only host as measured
    # (benchmarks/cpu_defaults.py; docs/benchmarks.md "CPU defaults"); 2 or more make replicas
    # to test data parallelism on a CPU. Ignored when GPUs are present.
    cpu_replicas: int = 1
    precision: str = "float32"
    # jit-compile (XLA) the per-replica forward/backward: `auto` = on with GPUs, off on CPU (as
    # measured: AUTO_XLA in components/training/loop.py has the figures), or `on` / `off`.
    xla: str = "auto"
    # Device memory (GiB per replica) the Trainer's memory estimate is checked against; 0 = detect
    # (GPU total memory, or the machine's RAM for CPU replicas).
    device_memory_gb: float = 0.0
    # Pipeline (GPipe) model parallelism: the block stack split into this many contiguous stages,
    # one device each (embeddings with the first, final norm and head with the last); the
    # train.accumulation_steps micro-batches stream through them. 1 = off. Needs
    # runtime.strategy=one_device (stages within one host; see docs/training.md).
    pipeline_stages: int = 1
    # Dense peak of one device in TFLOP/s at the run's precision (e.g. 989 for an H100 SXM in
    # bf16), so training logs MFU = tokens/s x FLOPs per token / (peak x devices) to TensorBoard
    # (`bigtrain ui` draws it). 0 = unknown: no MFU scalar (peaks differ by device and precision).
    peak_tflops_per_device: float = 0.0
    # Beam pipeline options for every Beam-based stage, e.g. ("--direct_running_mode=multi_processing",).
    beam_args: tuple[str, ...] = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
    # Beam stages that run on the DirectRunner (here) whatever runner beam_args name: the stages
    # a cluster runner cannot carry (Beam's DaskRunner: StatisticsGen; the reason in
    # components/config/beam_placement.py). The run's log names where each stage ran.
    beam_direct_stages: tuple[str, ...] = ("StatisticsGen",)
    # A run on the PortableRunner with an external worker pool (--environment_type=EXTERNAL) first
    # runs a one-element pipeline there: SDK workers that do not connect and finish it within this
    # many seconds fail the run with SdkWorkerError (runners/beam/sdk_workers.py) instead of hanging.
    sdk_worker_timeout_s: float = 120.0
    # During such a run (with --job_endpoint=embed), a Beam stage whose SDK worker makes no
    # progress (no element done, no bundle started or ended) for this many seconds is stopped and
    # fails with SdkWorkerError (runners/beam/sdk_stall.py) instead of waiting forever. A single element
    # that takes longer than this counts as a stall.
    sdk_worker_stall_s: float = 600.0
    # Where the Trainer trains: `local` (its own process) or `ray` (components/config/cluster.py).
    cluster: str = "local"
    ray: RayConfig = field(default_factory=RayConfig)


# Where compiled (scheduled) pipelines put artifacts and pushed models when the config leaves
# orchestrator.pipeline_root / serving_dir empty: a volume mounted on every cluster node.
SCHEDULED_PIPELINE_ROOT = "/mnt/bigtrain/pipelines"
SQLITE_FILE = "metadata.sqlite"   # the MLMD sqlite file's name: in a home, or on the cluster volume
SCHEDULED_SERVING_DIR = "/mnt/bigtrain/serving"


@dataclass(frozen=True)
class OrchestratorConfig:
    """Where a scheduled pipeline runs (Kubeflow Pipelines, Airflow). Local runs honour
    pipeline_root and serving_dir (empty: under the home); the rest is for scheduled runs."""
    # Container image with bigtrain installed (see Dockerfile); every Kubeflow step runs in it.
    image: str = "bigtrain:0.1.0"
    # Artifacts: an object-store URI (gs://, s3://) or a path. Empty: <home>/pipelines/<name> for
    # local runs, SCHEDULED_PIPELINE_ROOT for compiled (Kubeflow, Airflow) pipelines.
    pipeline_root: str = ""
    # Pushed models (<serving_dir>/<model name>/<version>/). Empty: <home>/serving for local runs,
    # SCHEDULED_SERVING_DIR for compiled pipelines.
    serving_dir: str = ""
    # Airflow: cron expression or preset, first logical date (YYYY-MM-DD), task retries.
    schedule: str = "@daily"
    start_date: str = "2026-01-01"
    retries: int = 1
    # Airflow: the MLMD sqlite file of scheduled runs (Kubeflow brings its own metadata store).
    metadata_path: str = f"/mnt/bigtrain/{SQLITE_FILE}"


@dataclass(frozen=True)
class PathsConfig:
    # Run state lives under home: the lock, run logs and configs, the MLMD sqlite file, and (unless
    # orchestrator.pipeline_root / serving_dir say otherwise) pipeline artifacts and pushed models.
    home: str = "./bigtrain_home"
    pipeline_name: str = "bigtrain"


@dataclass(frozen=True)
class MetadataConfig:
    """Where every command reads and records lineage: `sqlite` (sqlite_path, default
    <home>/metadata.sqlite) or `mysql` (a MySQL/MariaDB server, for shared deployments; MLMD's own
    C++ client, no Python driver). `--metadata URI` / $BIGTRAIN_METADATA set this section."""
    backend: str = "sqlite"
    # The sqlite file; empty: <home>/metadata.sqlite.
    sqlite_path: str = ""
    mysql_host: str = "127.0.0.1"
    mysql_port: int = 3306
    mysql_database: str = "metadb"
    mysql_user: str = "root"
    # The password is read from this environment variable (never from the command line, config
    # files or MLMD); it must be set (empty for a server without a password).
    mysql_password_env: str = "BIGTRAIN_METADATA_PASSWORD"


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    push: PushConfig = field(default_factory=PushConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    orchestrator: OrchestratorConfig = field(default_factory=OrchestratorConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    metadata: MetadataConfig = field(default_factory=MetadataConfig)
    preset: str = "tiny"
    tune: TuneConfig = field(default_factory=TuneConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


def with_scheduled_paths(config: "Config") -> "Config":
    """The config a compiled (Kubeflow, Airflow) pipeline uses: empty orchestrator.pipeline_root /
    serving_dir become the cluster volume defaults (local runs put them under the home instead)."""
    orchestrator = config.orchestrator
    return dataclasses.replace(config, orchestrator=dataclasses.replace(
        orchestrator, pipeline_root=orchestrator.pipeline_root or SCHEDULED_PIPELINE_ROOT,
        serving_dir=orchestrator.serving_dir or SCHEDULED_SERVING_DIR))
