"""A share mixture's measuring pass (mixture.py, share rule): the text tokens each source would
put into the train split at weight 1, read by the same rule that packs (ConvertUnitFn's
kept_documents: dedup, the screen, the split), so the weights meet the shares of what is packed.

    units ── Spread ── TallyUnitFn ──▶ (source, tokens) ── SumPerSource ──▶ {source: tokens}

The sum reaches ConvertUnitFn as a side input (mixture.share_weights turns it into weights).
Nothing is written and no counter moves here: the packing pass counts every document it drops
(sampled out, duplicates, quarantined) as before. A retried bundle yields the same tallies.
"""

from __future__ import annotations

import collections

import apache_beam as beam

from components.corpus import documents as docs


class Tally:
    """What kept_documents counts into, for the measuring pass: the counts are dropped (the
    packing pass moves the counters) and nothing is written to the quarantine manifest."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()

    def quarantine(self, event, **extra) -> bool:
        """True for a file (kept_documents' file accounting), like UnitWriter.quarantine."""
        return event.reason in docs.FILE_REASONS

    def screened(self, event, verdict, eval_sets) -> None:
        """A screened document is recorded by the packing pass only."""


class TallyUnitFn(beam.DoFn):
    """Unit -> (source, train tokens) for each source with a share that the unit holds."""

    def __init__(self, convert):
        """convert: the stage's ConvertUnitFn (its reading rule, tokenizer and sources)."""
        self._convert = convert

    def setup(self):
        self._convert.setup()

    def process(self, unit, duplicates=None, near_duplicates=None):
        tokens: collections.Counter = collections.Counter()
        for document, source in self._convert.kept_documents(unit, Tally(), duplicates,
                                                             near_duplicates):
            if source is not None and source.share is not None \
                    and self._convert.split_of(document) == "train":
                tokens[source.name] += self._convert.count_tokens(document.text)
        yield from sorted(tokens.items())


class MeasureSources(beam.PTransform):
    """PCollection[Unit] -> (source, its train tokens at weight 1) per source with a share that
    has any. duplicates, near_duplicates: the side inputs ConvertUnits reads, the same ones."""

    def __init__(self, convert, duplicates=None, near_duplicates=None):
        super().__init__()
        self._convert, self._duplicates, self._near = convert, duplicates, near_duplicates

    def expand(self, units):
        side = {name: beam.pvalue.AsDict(collection) for name, collection in
                (("duplicates", self._duplicates), ("near_duplicates", self._near))
                if collection is not None}
        return (units
                | "Spread" >> beam.Reshuffle()
                | "Tally" >> beam.ParDo(TallyUnitFn(self._convert), **side)
                | "SumPerSource" >> beam.CombinePerKey(sum))
