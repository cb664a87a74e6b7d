"""The Model artifact's MLMD property names, the one place that spells them: the Trainer executor
writes its training summary (components/training/run_fn.py, validation.py, warm_start.py,
hf_source.py) as the Model's custom properties; the run report, `bigtrain lineage`, the lineage
UI and the model card read them through these names. No TensorFlow import, so readers may use it."""

from __future__ import annotations

# the run
STEPS, RESUMED_FROM_STEP, SKIPPED_STEPS = "steps", "resumed_from_step", "skipped_steps"
TOKENS_SEEN, TOKENS_PER_SECOND = "tokens_seen", "tokens_per_second"
SPIKE_ROLLBACKS, SKIPPED_BATCHES = "spike_rollbacks", "skipped_batches"
PARAMETER_COUNT, FLOPS_PER_TOKEN = "parameter_count", "flops_per_token"
NUM_REPLICAS, PRECISION = "num_replicas", "precision"
CONFIG_DIGEST, CODE_DIGEST, CHECKPOINT_DIR = "config_digest", "code_digest", "checkpoint_dir"
VARIANTS = "variants"   # the exported variants, comma-separated
# the losses
FINAL_LOSS, FIRST_STEP_LOSS = "final_loss", "first_step_loss"
EVAL_LOSS, EVAL_ACCURACY, EVAL_BITS_PER_BYTE = "eval_loss", "eval_accuracy", "eval_bits_per_byte"
EVAL_SAMPLE_SEQUENCES, EVAL_LOSS_STANDARD_ERROR = "eval_sample_sequences", "eval_loss_standard_error"
UNIGRAM_BASELINE_LOSS = "unigram_baseline_loss"
ZLIB9_BITS_PER_BYTE, LZMA9_BITS_PER_BYTE = "zlib9_bits_per_byte", "lzma9_bits_per_byte"
# validation during training (validation.py)
VALIDATION_EVERY, VALIDATION_STEP = "validation_every", "validation_step"
VALIDATION_LOSS, VALIDATION_BITS_PER_BYTE = "validation_loss", "validation_bits_per_byte"
BEST_VALIDATION_LOSS, BEST_VALIDATION_STEP = "best_validation_loss", "best_validation_step"
KEPT_BEST_STEP = "kept_best_step"
# tuning and warm start
TUNED_HYPERPARAMETERS = "tuned_hyperparameters"
INIT_FROM, INIT_FROM_CHECKPOINT = "init_from", "init_from_checkpoint"
WARM_START_VARIABLES, FROZEN_PARAMETERS = "warm_start_variables", "frozen_parameters"
INIT_FROM_HF_DIR, INIT_FROM_HF_DIGEST = "init_from_hf_dir", "init_from_hf_digest"
INIT_FROM_HF_CLASS = "init_from_hf_class"
FINE_TUNED_FROM_MODEL_ID = "fine_tuned_from_model_id"   # the warm-start parent's artifact id
HF_DIGEST = "hf_digest"   # an imported Hugging Face directory's content digest (its Importer)

PROPERTIES = frozenset(value for name, value in dict(globals()).items()
                       if name.isupper() and isinstance(value, str))
