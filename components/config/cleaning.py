"""The data section's cleaning sub-sections (data.near_dedup, data.filters, data.decontaminate):
frozen dataclasses nested in DataConfig (tree.py), with the names their settings may take.
Their rules are in rules.py (validate_cleaning); the logic they configure is in
components/corpus/ (minhash.py, quality.py, contamination.py)."""

from __future__ import annotations

from dataclasses import dataclass

NEAR_DEDUP_SHINGLES = ("word", "byte")
# The quality filters by name (components/corpus/quality.py), in the order they are checked.
QUALITY_FILTERS = ("word_count", "mean_word_length", "symbol_ratio", "non_alpha_words",
                   "duplicate_lines", "top_ngram", "duplicate_ngrams", "code")
DECONTAMINATION_ACTIONS = ("remove", "flag")
# data.decontaminate.eval_files entries besides a glob: `home:<path>`, the eval split of that
# home's newest Examples (the runner resolves it, before the pipeline is built, into
# `examples:<that artifact's URI>`), and `examples:<URI>`, the eval split of one Examples
# artifact (components/text_example_gen/eval_split.py decodes it back into text).
HOME_PREFIX, EXAMPLES_PREFIX = "home:", "examples:"


@dataclass(frozen=True)
class NearDedupConfig:
    # Documents whose estimated Jaccard similarity of shingle sets reaches about this are one
    # cluster (the LSH bands are chosen for it); one document per cluster is packed.
    threshold: float = 0.8
    # Hash functions of a MinHash signature; bands x rows <= num_perm.
    num_perm: int = 128
    # LSH bands; 0 = derived from threshold and num_perm (datasketch's rule: least weighted
    # false positive + false negative probability); rows = num_perm // bands.
    bands: int = 0
    # Shingles: `word` (n consecutive words after lowercasing and collapsing whitespace) or
    # `byte` (n consecutive bytes of that normalized text; give a larger ngram then, e.g. 16:
    # texts share most 5-byte strings).
    shingle: str = "word"
    ngram: int = 5
    # Seed of the permutation family (the same seed gives the same clusters on every machine).
    seed: int = 1


@dataclass(frozen=True)
class QualityFilterConfig:
    # Names from QUALITY_FILTERS; a document failing one is skipped as
    # documents_skipped_filter_<name> (the first failing filter in QUALITY_FILTERS order).
    enabled: tuple[str, ...] = ()
    # word_count: words (whitespace-separated) outside [min_words, max_words].
    min_words: int = 50
    max_words: int = 100_000
    # mean_word_length: mean characters per word outside [min, max].
    min_mean_word_length: float = 3.0
    max_mean_word_length: float = 10.0
    # symbol_ratio: ("#" + "..." + "\u2026") per word above this.
    max_symbol_ratio: float = 0.1
    # non_alpha_words: share of words without an alphabetic character above this.
    max_non_alpha_word_fraction: float = 0.2
    # duplicate_lines: share of non-empty lines repeating an earlier line above this.
    max_duplicate_line_fraction: float = 0.3
    # top_ngram: characters of the most frequent word top_ngram_n-gram (times its count) over
    # all word characters above this.
    top_ngram_n: int = 2
    max_top_ngram_fraction: float = 0.2
    # duplicate_ngrams: characters of words inside a repeated duplicate_ngram_n-gram (every
    # occurrence after the first) over all word characters above this.
    duplicate_ngram_n: int = 5
    max_duplicate_ngram_fraction: float = 0.15
    # code (source files): a line longer than max_line_length, a mean line length above
    # max_mean_line_length, or a share of alphanumeric characters below min_alphanumeric_fraction.
    max_line_length: int = 1000
    max_mean_line_length: float = 100.0
    min_alphanumeric_fraction: float = 0.25


@dataclass(frozen=True)
class DecontaminationConfig:
    # Evaluation sets: globs of files (text, or .jsonl/.json: every string value of a record),
    # `home:<path>` (the eval split of that home's newest Examples) or `examples:<URI>` (the eval
    # split of one Examples artifact); each entry is one set, counted on its own. Empty: no
    # decontamination.
    eval_files: tuple[str, ...] = ()
    # A training document sharing one word n-gram of this length with an evaluation set is
    # contaminated (lm-eval's 13-gram rule).
    ngram: int = 13
    # An evaluation text shorter than ngram words is matched as a whole: a training document
    # containing its words in a row (normalized) is contaminated, as in the GPT-3 paper's
    # contamination analysis; one of fewer than min_words words is not checked (counted as
    # "eval texts too short to check"). In [1, ngram].
    min_words: int = 8
    # `remove`: skipped as documents_skipped_contaminated; `flag`: packed, counted as
    # documents_flagged_contaminated and listed in the manifest.
    action: str = "remove"
