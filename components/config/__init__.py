"""The config package: one typed tree (tree.py; the data section's cleaning sub-sections in
cleaning.py), presets (presets.py), YAML + `--set` and (de)serialization (loading.py),
cross-field rules (rules.py), tuned values (hyperparameters.py), what each stage reads and its
hand-off (stages.py, imported as `from components.config import stages`).

`from components import config as config_lib` gives the whole public surface below; the modules
inside import each other directly (never this package), so the import graph has no cycle.
"""

from components.config.loading import (build_config, digest, from_dict, load_yaml, merge,
                                        parse_override, save_config, section_json, section_part,
                                        section_without, to_dict)
from components.config.presets import PRESETS, base, large, small, tiny
from components.config.rules import expected_replicas, validate
from components.config.tree import (
    STRATEGIES, PRECISIONS, DATA_FORMATS, DOCUMENT_MODES, REMAT_MODES, XLA_MODES, ON_OFF_KEYS,
    ARCHS, LR_SCHEDULES, TOKENIZERS, TOKENIZER_MODEL_TYPES, MIN_SENTENCEPIECE_VOCAB, ConfigError,
    DataConfig, SourceConfig, DEFAULT_SOURCE, NearDedupConfig, QualityFilterConfig,
    DecontaminationConfig, DEDUP_MODES, NEAR_DEDUP_SHINGLES, QUALITY_FILTERS, DECONTAMINATION_ACTIONS,
    HOME_PREFIX, EXAMPLES_PREFIX, ModelConfig, TrainConfig, EvalConfig, EXPORT_VARIANTS, SERVABLE_VARIANTS, ExportConfig,
    PushConfig, PUSH_FORMATS, VERSION_POLICIES,
    RuntimeConfig, OrchestratorConfig, TuneSpaceConfig, TuneConfig, PathsConfig, MetadataConfig,
    TrackingConfig, TRACKING_BACKENDS, Config, SCHEDULED_PIPELINE_ROOT, SCHEDULED_SERVING_DIR, with_scheduled_paths)

__all__ = [
    "build_config", "digest", "from_dict", "load_yaml", "merge", "parse_override",
    "save_config", "section_json", "section_part",
    "section_without", "to_dict", "PRESETS", "base", "large", "small", "tiny",
    "expected_replicas", "validate", "STRATEGIES", "PRECISIONS", "DATA_FORMATS",
    "DOCUMENT_MODES", "REMAT_MODES", "XLA_MODES", "ON_OFF_KEYS", "ARCHS", "LR_SCHEDULES", "TOKENIZERS",
    "TOKENIZER_MODEL_TYPES", "MIN_SENTENCEPIECE_VOCAB", "ConfigError", "DataConfig", "SourceConfig", "DEFAULT_SOURCE",
    "NearDedupConfig", "QualityFilterConfig", "DecontaminationConfig", "DEDUP_MODES",
    "NEAR_DEDUP_SHINGLES", "QUALITY_FILTERS", "DECONTAMINATION_ACTIONS", "HOME_PREFIX",
    "EXAMPLES_PREFIX",
    "ModelConfig", "TrainConfig", "EvalConfig", "EXPORT_VARIANTS", "SERVABLE_VARIANTS",
    "ExportConfig", "PushConfig", "PUSH_FORMATS", "VERSION_POLICIES", "RuntimeConfig", "OrchestratorConfig",
    "TuneSpaceConfig", "TuneConfig", "PathsConfig", "MetadataConfig", "TrackingConfig",
    "TRACKING_BACKENDS", "Config",
    "SCHEDULED_PIPELINE_ROOT", "SCHEDULED_SERVING_DIR", "with_scheduled_paths"]
