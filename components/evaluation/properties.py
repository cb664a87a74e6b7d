"""The ModelEvaluation artifact's MLMD property names, the one place that spells them (with the figure names its co-owners hold: documents.py's whole-document figures,
held_out_sets.py's `heldout_<set>_<figure>`, tasks.py's code tasks). The Evaluator
(components/evaluation/component.py) writes them; the run report, `bigtrain lineage` and the
lineage UI read them. The ModelBlessing's names: components/serving/blessing.py (the push stage
reads them too), re-exported here for the Evaluator's readers. No TensorFlow import."""

from __future__ import annotations

from components.evaluation import held_out_sets
from components.evaluation.documents import DOCUMENT_COUNTS, DOCUMENT_FIGURES
from components.evaluation.tasks import TASK_COUNTS, TASK_FIGURES
from components.serving.blessing import (BASELINE_MODEL, BASELINE_MODEL_ID, BLESSED, CURRENT_MODEL,  # noqa: F401
                                         CURRENT_MODEL_ID, REASON, SERVE_PATH, SERVE_VARIANT)

# ModelEvaluation: the float model's figures on the eval split
LOSS, PERPLEXITY, ACCURACY = "loss", "perplexity", "accuracy"
BITS_PER_BYTE, LOSS_STANDARD_ERROR = "bits_per_byte", "loss_standard_error"
FIGURES = (LOSS, PERPLEXITY, ACCURACY, BITS_PER_BYTE, LOSS_STANDARD_ERROR)
EXAMPLES, SAMPLE_SEQUENCES, TOKENS = "examples", "sample_sequences", "tokens"
COUNTS = (EXAMPLES, SAMPLE_SEQUENCES, TOKENS)
BASELINE_LOSS, BASELINE_BITS_PER_BYTE = "baseline_loss", "baseline_bits_per_byte"
VARIANTS = "variants"             # the measured variants, comma-separated
DOCUMENT_VARIANT = "document_variant"
TASK_SET = "task_set"
HELDOUT_SETS = held_out_sets.SETS_PROPERTY
DOCUMENT_COUNT, DOCUMENT_BYTES, DOCUMENT_TOKENS, DOCUMENT_STRIDE_CONTEXT = DOCUMENT_COUNTS
(TASK_COMPLETION_EXACT_MATCH, TASK_COMPLETION_EDIT_SIMILARITY, TASK_CHOICE_ACCURACY,
 TASK_CHOICE_CENTRED_ACCURACY) = TASK_FIGURES
(TASK_ITEMS,) = TASK_COUNTS
# per variant: <variant>_<figure> (variant_property)
VARIANT_FIGURES = ("loss", "loss_delta", "loss_delta_se", "latency_ms")
VARIANT_COUNTS = ("size_bytes", "batches")
FIT_TO_SERVE, VARIANT_REASON = "fit_to_serve", "reason"   # suffixes, not names


def variant_property(variant: str, figure: str) -> str:
    """`<variant>_<figure>`: figure one of VARIANT_FIGURES, VARIANT_COUNTS, FIT_TO_SERVE,
    VARIANT_REASON."""
    return f"{variant}_{figure}"


heldout_property = held_out_sets.property_name

PROPERTIES = frozenset(
    [value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
     and name not in ("FIT_TO_SERVE", "VARIANT_REASON")]
    + list(FIGURES + COUNTS + DOCUMENT_FIGURES + DOCUMENT_COUNTS + TASK_FIGURES + TASK_COUNTS))
_SUFFIXES = "|".join(VARIANT_FIGURES + VARIANT_COUNTS + (FIT_TO_SERVE, VARIANT_REASON))
PATTERNS = (rf"(float|int8|tflite)_({_SUFFIXES})",
            rf"{held_out_sets.PREFIX}[a-z0-9_-]+_({'|'.join(DOCUMENT_FIGURES + DOCUMENT_COUNTS)})")
