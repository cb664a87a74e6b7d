"""The data section's mixture: one frozen SourceConfig per named source (`data.sources`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceConfig:
    """One named source of a mixture (`data.sources`). Its reading settings mean what the
    data-level ones of the same name mean; `weight` is how many epochs of this source the train
    split holds in expectation (docs/data.md, mixtures): 2.5 = every document twice plus half of
    them a third time, 0.3 = a 30% sample. `share` instead: the part of the train tokens this
    source should be (0 < share <= 1, a mixture's shares summing to 1 within SHARE_TOLERANCE),
    met by repeating or sampling it (docs/data.md, mixtures: weight or share). A mixture gives
    every source a share or none (then weights)."""
    name: str = ""
    input: str = ""
    exclude: tuple[str, ...] = ()
    format: str = "text"
    document: str = "file"
    separator: str = "\n\n"
    text_field: str = "text"
    weight: float = 1.0
    # Quality filters for this source's documents: None = the data-level setting, a list = exactly
    # these filter names ([] = none).
    filters: tuple[str, ...] | None = None
    # The target share of the train tokens (None: `weight`, epochs, decides).
    share: float | None = None


# A mixture's shares sum to 1 within this (three sources of 0.3333 are accepted); the stage
# divides each by their sum, so the tolerance never skews the proportions.
SHARE_TOLERANCE = 1e-3

# The name of the one source that data.input (the shorthand, no data.sources) stands for.
DEFAULT_SOURCE = "default"
