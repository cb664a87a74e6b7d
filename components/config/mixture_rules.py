"""The mixture's rules (`data.sources`): named, unique, readable sources with finite positive
weights, or shares that sum to 1 (rules.py's validate_data calls these; split from it to keep
each module one screenful of rules per topic)."""

from __future__ import annotations

import math
import re

from components.config.bounds import one_of
from components.config.cleaning import QUALITY_FILTERS
from components.config.sources import SHARE_TOLERANCE
from components.config.tree import DATA_FORMATS, DOCUMENT_MODES, Config, ConfigError

# A source name becomes part of counter and property names (source_<name>_documents_train).
SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def validate_sources(config: Config) -> None:
    """data.sources: named, unique, readable settings, finite positive weights."""
    d, names = config.data, set()
    for i, source in enumerate(d.sources):
        key = f"data.sources[{i}]"
        if not SOURCE_NAME.fullmatch(source.name):
            raise ConfigError(f"{key}.name: {source.name!r} is not a source name (letters, digits, "
                              "_ and -, starting with a letter or digit)")
        key = f"data.sources[{i}] ({source.name})"
        if source.name in names:
            raise ConfigError(f"{key}.name: {source.name!r} names two sources; names must be unique")
        names.add(source.name)
        if not source.input:
            raise ConfigError(f"{key}.input: must name a glob, a directory or an object-store URI")
        if not (math.isfinite(source.weight) and source.weight > 0):
            raise ConfigError(f"{key}.weight: must be a finite number > 0, got {source.weight}")
        one_of(f"{key}.format", source.format, tuple(f for f in DATA_FORMATS if f != "tfrecord"))
        one_of(f"{key}.document", source.document, DOCUMENT_MODES)
        if source.document == "separator" and not source.separator:
            raise ConfigError(f"{key}.separator: must not be empty with document=separator")
        if source.format in ("jsonl", "parquet") and not source.text_field:
            raise ConfigError(f"{key}.text_field: must name the text field for format={source.format}")
        for name in source.filters or ():
            if name not in QUALITY_FILTERS:
                raise ConfigError(f"{key}.filters: unknown filter {name!r}; known: "
                                  f"{', '.join(QUALITY_FILTERS)}")


def validate_shares(config: Config) -> None:
    """data.sources[*].share: every source or none, no weight beside it, each in (0, 1], summing
    to 1 within SHARE_TOLERANCE."""
    sources = config.data.sources
    shared = [s for s in sources if s.share is not None]
    if not shared:
        return
    for i, source in enumerate(sources):
        key = f"data.sources[{i}] ({source.name})"
        if source.share is None:
            raise ConfigError(
                f"{key}.share: missing; a mixture gives every source a share (the part of the "
                f"train tokens) or none (weights, epochs of each source): "
                f"{', '.join(s.name for s in shared)} have one")
        if source.weight != 1.0:
            raise ConfigError(
                f"{key}.weight: a mixture gives shares or weights, not both; remove the weight "
                f"(share {source.share:g} decides its epochs) or every share")
        if not 0.0 < source.share <= 1.0:
            raise ConfigError(f"{key}.share: must be in (0, 1], got {source.share}")
    total = sum(s.share for s in sources)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ConfigError(
            f"data.sources[*].share: must sum to 1 (within {SHARE_TOLERANCE:g}), got {total:g} ("
            + ", ".join(f"{s.name} {s.share:g}" for s in sources) + ")")
