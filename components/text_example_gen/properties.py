"""The Examples artifact's MLMD property names, the one place that spells them: TextExampleGen
(components/text_example_gen/component.py) writes every counter of the data pipeline and what the
input and the cleaning were; the run report, `bigtrain lineage` (content, inputs), the lineage UI
and the model card's data facts read them. No TensorFlow, TFX or Beam import."""

from __future__ import annotations

from components.corpus import documents as docs
from components.corpus.screen import EVAL_SET_COUNTER

# counters (also the Beam metrics' names; transforms.py counts them)
FILES_SEEN, FILES_READ, FILES_LISTED = "files_seen", "files_read", "files_listed"
DOCUMENTS_PACKED, DOCUMENTS_REPEATED = "documents_packed", "documents_repeated"
DOCUMENTS_SAMPLED_OUT, BYTES_SAMPLED_OUT = "documents_sampled_out", "bytes_sampled_out"
DOCUMENTS_FLAGGED_CONTAMINATED = "documents_flagged_contaminated"
BYTES_READ, BYTES_PACKED, BYTES_QUARANTINED = "bytes_read", "bytes_packed", "bytes_quarantined"
BYTES_SEPARATORS, BYTES_DUPLICATE = "bytes_separators", "bytes_duplicate"
SEQUENCES_TRAIN, SEQUENCES_EVAL = "sequences_train", "sequences_eval"
TOKENS_REAL, TOKENS_PADDING = "tokens_real", "tokens_padding"
REAL_TOKEN_FRACTION = "real_token_fraction"
FILES_SKIPPED, DOCUMENTS_SKIPPED = "files_skipped_", "documents_skipped_"   # + a reason
CONTAMINATED_EVAL_SET = EVAL_SET_COUNTER                                  # + an eval set's name


def file_skipped(reason: str) -> str:
    return FILES_SKIPPED + reason


def document_skipped(reason: str) -> str:
    return DOCUMENTS_SKIPPED + reason


# the skip counters, in the order the report lists them (documents: the cleaning steps' reasons;
# the quality filters' own reasons are listed by filter)
FILES_SKIPPED_COUNTERS = tuple(file_skipped(r) for r in docs.FILE_REASONS)
DOCUMENTS_SKIPPED_COUNTERS = tuple(document_skipped(r) for r in docs.DOCUMENT_REASONS
                                   if r not in docs.FILTER_REASONS)
COUNTERS = ((FILES_SEEN, FILES_READ, DOCUMENTS_PACKED, BYTES_READ, BYTES_PACKED, BYTES_QUARANTINED,
             BYTES_SEPARATORS, BYTES_DUPLICATE, SEQUENCES_TRAIN, SEQUENCES_EVAL, TOKENS_REAL,
             TOKENS_PADDING, DOCUMENTS_REPEATED, DOCUMENTS_SAMPLED_OUT, BYTES_SAMPLED_OUT,
             DOCUMENTS_FLAGGED_CONTAMINATED)
            + tuple(file_skipped(r) for r in docs.FILE_REASONS)
            + tuple(document_skipped(r) for r in docs.DOCUMENT_REASONS))

# the input
INPUT, INPUT_ROOT, INPUT_FINGERPRINT = "input", "input_root", "input_fingerprint"
FORMAT, DOCUMENT = "format", "document"           # the sources' formats and document fields
SOURCES = "sources"                               # JSON: every source, its figures
QUARANTINE_MANIFEST, INPUT_LISTING = "quarantine_manifest", "input_listing"   # their paths
SEQ_LEN = "seq_len"
# the cleaning (component.cleaning_properties; JSON but DEDUP)
DEDUP, NEAR_DEDUP = "dedup", "near_dedup"
QUALITY_FILTERS, QUALITY_FILTERS_BY_SOURCE = "quality_filters", "quality_filters_by_source"
DECONTAMINATION, DECONTAMINATION_EVAL_SETS = "decontamination", "decontamination_eval_sets"
# the tokenizer the ids come from
TOKENIZER, TOKENIZER_DIR, TOKENIZER_KIND = "tokenizer", "tokenizer_dir", "tokenizer_kind"
VOCAB_SIZE, PAD_ID = "vocab_size", "pad_id"

PROPERTIES = frozenset(COUNTERS + tuple(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
    and name not in ("FILES_SKIPPED", "DOCUMENTS_SKIPPED", "CONTAMINATED_EVAL_SET")))
PATTERNS = (rf"{FILES_SKIPPED}[a-z_]+", rf"{DOCUMENTS_SKIPPED}[a-z_]+",
            rf"{CONTAMINATED_EVAL_SET}.+")
