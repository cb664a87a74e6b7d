"""Mixtures (data.sources): which source a unit reads, how many times a document is packed, and
the per-source counters. Plain functions (no Beam).

Weight rule. A source of weight w packs each of its train documents floor(w) times, plus once
more when u(content_key, source, floor(w)) < frac(w), where u is the first 64 bits of
sha256("<content key>\\0<source>\\0<repeat>") read as a fraction of 2**64. So weight 1 packs every
document once (no hash is read: the one-source shorthand packs exactly what it packed before
mixtures), 2.5 packs every document twice and half of them (chosen by content) a third time
(2.5 epochs in expectation), 0.3 packs a 30% sample. An eval document is packed at most once
(min(copies, 1)): weight < 1 samples the eval split the same way, weight > 1 never repeats it.
The split is still decided by content before the rule applies, so no copy of a train document
can reach eval. Everything depends on the content and the source name only: reruns, listing
order and parallelism do not change which documents are repeated or sampled.

Copy r of a unit's documents goes into its own packing stream (one Packer per split and copy),
so the copies of one document land in different windows, not side by side in one context.

Counters per source and split (Beam counters, MLMD int properties of the Examples):
  source_<name>_documents_<split>   documents packed, each copy counted
  source_<name>_bytes_<split>       their input bytes, each copy counted
  source_<name>_tokens_<split>      their text tokens (no BOS/EOS/padding), each copy counted
  source_<name>_unique_<split>      distinct documents packed (copies not counted)
  source_<name>_sampled_out_<split> documents the weight rule left out (copies == 0)
`source_table` reads them back. The realized epochs of a source: its train documents packed (every
copy) / its distinct train documents after exact dedup (packed or sampled out): ~ the weight. Its
realized share: its train tokens (every copy) / all sources' train tokens. A weight is epochs of
its own source, not a share: two sources of weight 1 have shares in the ratio of their sizes.

Share rule. A mixture may instead give each source a `share`: the part of the train tokens it
should be. One pass more (transforms.MeasureSources) counts t_i, the text tokens source i would
put into the train split at weight 1 (after dedup and the screen); the source is then packed by
the weight rule above with weight w_i = p_i * T / t_i, p_i its share over the sum of the shares
and T = sum of t_j: the train split holds as many tokens as one epoch of every source, divided
by the shares (`share_weights`). A fractional w_i is met by the same seeded per-document hash,
so the realized share differs from the asked one by the sampling error only (docs/data.md).
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Iterable, NamedTuple

from components.corpus import documents as docs
from components.corpus import readers

SPLITS = ("train", "eval")
MEASURES = ("documents", "bytes", "tokens", "unique", "sampled_out")
_COUNTER = re.compile(r"source_(?P<name>.+)_(?P<measure>%s)_(?P<split>train|eval)"
                      % "|".join(MEASURES))


class SourceSpec(NamedTuple):
    """What the data stage needs of one SourceConfig (picklable, no config import)."""
    name: str
    reader: readers.ReaderConfig
    weight: float = 1.0
    # None: the data-level quality filter setting; a tuple: exactly these filter names.
    filters: tuple[str, ...] | None = None
    # The asked share of the train tokens (share rule), or None: `weight` is the epochs.
    share: float | None = None


def reading_of(sources: dict[str, SourceSpec], piece: readers.Piece,
               reader: readers.ReaderConfig, filters: tuple[str, ...]
               ) -> tuple[SourceSpec | None, readers.ReaderConfig, tuple[str, ...]]:
    """A piece's source, the reader settings to read it with and the quality filters its
    documents pass: its source's own, else the data-level `reader` and `filters`. The one rule
    every pass over the units (exact and near dedup, the converter) applies."""
    source = sources.get(piece.source)
    if source is None:
        return None, reader, filters
    return source, source.reader, filters if source.filters is None else tuple(source.filters)


def plan_mixture(sources: Iterable[tuple[SourceSpec, list[tuple[str, str]]]]) -> list[readers.Unit]:
    """Units of every source in config order (plan_units per source, each source's files with its
    own reader settings), numbered on across sources; each piece names its source. One source:
    exactly plan_units' units, so the shorthand's shards do not move."""
    return readers.plan_sources((spec.name, spec.reader, files) for spec, files in sources)


def _fraction(content_key: str, source: str, repeat: int) -> float:
    digest = hashlib.sha256(f"{content_key}\0{source}\0{repeat}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def copies(text: bytes, source: str, weight: float, split: str) -> int:
    """How many times the weight rule packs this document (module docstring)."""
    whole = math.floor(weight)
    extra = weight - whole
    count = whole + (1 if extra > 0 and _fraction(docs.content_key(text), source, whole) < extra
                     else 0)
    return min(count, 1) if split == "eval" else count


def share_weights(sources: Iterable[SourceSpec], train_tokens: dict[str, int]
                  ) -> dict[str, float]:
    """{source: the weight that meets its share} (share rule, module docstring) from
    {source: its train tokens at weight 1}; only the sources with a share. A source with no
    train tokens gets weight 1 (nothing to repeat: its realized share is 0); the others divide
    the train tokens in the ratio of their shares."""
    shared = [spec for spec in sources if spec.share is not None]
    asked = sum(spec.share for spec in shared if train_tokens.get(spec.name))
    total = sum(train_tokens.get(spec.name, 0) for spec in shared)
    return {spec.name: (spec.share / asked * total / train_tokens[spec.name]
                        if train_tokens.get(spec.name) else 1.0) for spec in shared}


def counter_name(source: str, measure: str, split: str) -> str:
    return f"source_{source}_{measure}_{split}"


def counter_names(source: str) -> list[str]:
    """Every counter of one source."""
    return [counter_name(source, measure, split) for measure in MEASURES for split in SPLITS]


def source_table(counters: dict[str, int]) -> dict[str, dict]:
    """{source: {measure: {split: n}} for every measure, "epochs" and "share" (module
    docstring)} from the counters."""
    table: dict[str, dict] = {}
    for key, value in counters.items():
        match = _COUNTER.fullmatch(key)
        if match:
            row = table.setdefault(match["name"], {m: dict.fromkeys(SPLITS, 0) for m in MEASURES})
            row[match["measure"]][match["split"]] += int(value)
    train_tokens = sum(row["tokens"]["train"] for row in table.values())
    for row in table.values():
        distinct = row["unique"]["train"] + row["sampled_out"]["train"]
        row["epochs"] = round(row["documents"]["train"] / distinct, 6) if distinct else 0.0
        row["share"] = round(row["tokens"]["train"] / train_tokens, 6) if train_tokens else 0.0
    return table
