"""Exact dedup in Beam: which documents repeat an earlier one (by content key), as the side
input ConvertUnitFn skips them by (transforms.py). Reads each unit once more, keeping only
digests, so the shuffle never holds a text."""

from __future__ import annotations

import apache_beam as beam

from components.corpus import documents as docs
from components.corpus import readers
from components.corpus.documents import Document
from components.text_example_gen import mixture


class DigestUnitFn(beam.DoFn):
    """Unit -> (content_key digest, (unit index, ordinal)) for each packable document."""

    def __init__(self, config: readers.ReaderConfig,
                 sources: dict[str, mixture.SourceSpec] | None = None):
        self._config, self._readers = config, {n: s.reader for n, s in (sources or {}).items()}

    def process(self, unit: readers.Unit):
        ordinal = 0
        for piece in unit.pieces:
            for event in readers.read_piece(piece, self._readers.get(piece.source, self._config)):
                if isinstance(event, Document):
                    yield bytes.fromhex(docs.content_key(event.text)), (unit.index, ordinal)
                    ordinal += 1


def _later_copies(element):
    """(digest, locations) -> every location but the first in reading order."""
    _, locations = element
    return sorted(locations)[1:]


class FindDuplicates(beam.PTransform):
    """PCollection[Unit] -> (unit index, [ordinals of documents that repeat an earlier one]).

    Reads the units once more, keeping only digests: the shuffle holds one 32-byte digest and one
    (unit, ordinal) pair per document, never a text, and what reaches ConvertUnitFn (a side
    input) is the later copies' locations only, O(duplicates) integers."""

    def __init__(self, config: readers.ReaderConfig,
                 sources: dict[str, mixture.SourceSpec] | None = None):
        super().__init__()
        self._config, self._sources = config, sources

    def expand(self, units):
        return (units
                | "Digests" >> beam.ParDo(DigestUnitFn(self._config, self._sources))
                | "GroupCopies" >> beam.GroupByKey()
                | "LaterCopies" >> beam.FlatMap(_later_copies)
                | "ByUnit" >> beam.GroupByKey()
                | "AsLists" >> beam.MapTuple(lambda unit, ordinals: (unit, sorted(ordinals))))
