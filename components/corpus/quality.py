"""Heuristic quality filters (Gopher / C4 rules for prose, The Stack's for source files): plain
functions over one document's text. Each check says whether the document FAILS it under the
thresholds of a data.filters config (components/config/cleaning.py QualityFilterConfig).

Words are whitespace-separated tokens; lines are split on "\\n"; characters are Unicode code
points. `failing_filter` runs the enabled checks in QUALITY_FILTERS order and names the first one
the document fails, so the counts per filter do not depend on the order names are listed in.
"""

from __future__ import annotations

import collections
from typing import Callable, Iterable

from components.config.cleaning import QUALITY_FILTERS


class Text:
    """A document's text with its words split once, on first use (the lines are split by the one
    check that reads them, fails_duplicate_lines, each time it runs)."""

    def __init__(self, text: str):
        self.text = text
        self._words: list[str] | None = None

    @property
    def words(self) -> list[str]:
        if self._words is None:
            self._words = self.text.split()
        return self._words

    @property
    def word_chars(self) -> int:
        return sum(len(w) for w in self.words)


def fails_word_count(doc: Text, t) -> bool:
    return not t.min_words <= len(doc.words) <= t.max_words


def fails_mean_word_length(doc: Text, t) -> bool:
    if not doc.words:
        return True
    mean = doc.word_chars / len(doc.words)
    return not t.min_mean_word_length <= mean <= t.max_mean_word_length


def fails_symbol_ratio(doc: Text, t) -> bool:
    symbols = doc.text.count("#") + doc.text.count("...") + doc.text.count("\u2026")
    return symbols / max(len(doc.words), 1) > t.max_symbol_ratio


def fails_non_alpha_words(doc: Text, t) -> bool:
    if not doc.words:
        return True
    without_letter = sum(1 for w in doc.words if not any(c.isalpha() for c in w))
    return without_letter / len(doc.words) > t.max_non_alpha_word_fraction


def fails_duplicate_lines(doc: Text, t) -> bool:
    lines = [line.strip() for line in doc.text.split("\n") if line.strip()]
    repeated = len(lines) - len(set(lines))
    return repeated / max(len(lines), 1) > t.max_duplicate_line_fraction


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def fails_top_ngram(doc: Text, t) -> bool:
    grams = _ngrams(doc.words, t.top_ngram_n)
    if not grams:
        return False
    top, count = max(collections.Counter(grams).items(), key=lambda item: (item[1], item[0]))
    if count < 2:
        return False
    return sum(len(w) for w in top) * count / max(doc.word_chars, 1) > t.max_top_ngram_fraction


def fails_duplicate_ngrams(doc: Text, t) -> bool:
    """Characters of the words covered by a repeat (every occurrence after the first) of an
    n-gram, each word counted once."""
    n, seen, covered = t.duplicate_ngram_n, set(), set()
    for i, gram in enumerate(_ngrams(doc.words, n)):
        if gram in seen:
            covered.update(range(i, i + n))
        seen.add(gram)
    chars = sum(len(doc.words[i]) for i in covered)
    return chars / max(doc.word_chars, 1) > t.max_duplicate_ngram_fraction


def fails_code(doc: Text, t) -> bool:
    lines = doc.text.split("\n")
    lengths = [len(line) for line in lines]
    alphanumeric = sum(1 for c in doc.text if c.isalnum())
    return (max(lengths) > t.max_line_length
            or sum(lengths) / len(lines) > t.max_mean_line_length
            or alphanumeric / max(len(doc.text), 1) < t.min_alphanumeric_fraction)


CHECKS: dict[str, Callable[[Text, object], bool]] = {
    "word_count": fails_word_count, "mean_word_length": fails_mean_word_length,
    "symbol_ratio": fails_symbol_ratio, "non_alpha_words": fails_non_alpha_words,
    "duplicate_lines": fails_duplicate_lines, "top_ngram": fails_top_ngram,
    "duplicate_ngrams": fails_duplicate_ngrams, "code": fails_code}


def failing_filter(text: str, enabled: Iterable[str], thresholds) -> str | None:
    """The first enabled filter (QUALITY_FILTERS order) the text fails, or None."""
    enabled = frozenset(enabled)
    unknown = enabled - set(CHECKS)
    if unknown:
        raise ValueError(f"data.filters.enabled: unknown filter(s) {sorted(unknown)}; known: "
                         f"{', '.join(QUALITY_FILTERS)}")
    doc = Text(text)
    for name in QUALITY_FILTERS:
        if name in enabled and CHECKS[name](doc, thresholds):
            return name
    return None
