"""The per-document screen of the data stage: quality filters, then decontamination, in one call
(`DocumentScreen.check`), so the converter and the near-duplicate pass skip the same documents.

A verdict names the reason a document is skipped (`filter_<name>` or `contaminated`) with a
detail for the quarantine manifest; with data.decontaminate.action=flag a contaminated document
is kept (verdict.keep) and only listed. The filter set is an argument of each call: each
document may be screened by its own source's filters.
"""

from __future__ import annotations

from typing import NamedTuple

from components.corpus import contamination, quality
from components.corpus.documents import CONTAMINATED, filter_reason


# The data stage's counter of contaminated documents (removed or flagged) per evaluation set: the
# i-th entry of data.decontaminate.eval_files; a document may count for several sets.
EVAL_SET_COUNTER = "documents_contaminated_eval_set_"


class Verdict(NamedTuple):
    reason: str
    detail: str
    keep: bool = False          # flagged, still packed
    eval_sets: tuple[str, ...] = ()


class DocumentScreen:
    """Quality thresholds and resolved evaluation sets; pickled with paths only (each worker
    builds the n-gram index on its first check)."""

    def __init__(self, thresholds, eval_sets: tuple[tuple[str, tuple[str, ...]], ...] = (),
                 ngram: int = 13, action: str = "remove", min_words: int = 8):
        self.thresholds, self.eval_sets, self.ngram, self.action = thresholds, eval_sets, ngram, action
        self.min_words = min_words
        self._index: contamination.EvalIndex | None = None

    def __getstate__(self):
        return dict(self.__dict__, _index=None)

    @property
    def eval_set_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.eval_sets)

    def index(self) -> contamination.EvalIndex:
        if self._index is None:
            self._index = contamination.build_index(self.eval_sets, self.ngram, self.min_words)
        return self._index

    def check(self, text: bytes, filters: tuple[str, ...]) -> Verdict | None:
        """Why text is skipped (or flagged), or None to pack it. text: valid UTF-8."""
        if filters:
            failed = quality.failing_filter(text.decode("utf-8"), filters, self.thresholds)
            if failed is not None:
                return Verdict(filter_reason(failed), f"quality filter {failed}")
        if self.eval_sets:
            matched = self.index().matched(text)
            if matched:
                detail = "; ".join(
                    f"shares a {self.ngram}-gram with {name}" if length >= self.ngram else
                    f"contains a {length}-word text of {name}" for name, length in matched.items())
                return Verdict(CONTAMINATED, detail, keep=self.action == "flag",
                               eval_sets=tuple(matched))
        return None


def filters_used(data) -> bool:
    """Whether any document of a DataConfig meets a quality filter: the data-level list (for
    sources without their own) or a source's own list (data.sources[i].filters)."""
    return any(data.filters.enabled if source.filters is None else source.filters
               for source in data.mixture())


def screen_for(data, decoded: dict[str, tuple[str, ...]] | None = None) -> DocumentScreen | None:
    """The screen of a DataConfig (eval globs resolved now; decoded: the files of its `examples:`
    entries), or None when it screens nothing: no quality filter applies to any source and no
    evaluation set is named."""
    patterns = data.decontaminate.eval_files
    if not filters_used(data) and not patterns:
        return None
    return DocumentScreen(data.filters, contamination.resolve_eval_sets(patterns, decoded),
                          data.decontaminate.ngram, data.decontaminate.action,
                          data.decontaminate.min_words)
