"""Beam composites of data cleaning: near-duplicate clusters (MinHash LSH) for ConvertUnitFn.

    units ─SignatureUnitFn─▶ (band key, document) per band ─GroupByKey─▶ buckets
          ─edges (first member, each other)─▶ ─CombineGlobally(union-find)─▶ clusters
          ─▶ (unit index, [(ordinal, representative id) ...]) for every member but the first

A document enters only when exact dedup kept it (the FindDuplicates side input) and the
per-document screen (quality filters, decontamination) passes it, so a representative is never a
document the converter skips. Two documents are one cluster when a chain of shared bands joins
them (connected components); the representative is the first in reading order (unit index,
then ordinal), whatever order edges arrive in: union-find always keeps the smaller root.

Memory: the signature pass holds one document and its signature (num_perm x 4 bytes); the
shuffle holds `bands` keys of 10 bytes plus one location per document; one bucket (documents
sharing a band) is held whole by one worker; the union-find is held by one worker and holds only
the documents that share a band with another one (a dict entry, a location tuple and its id:
about 210 bytes each in CPython, docs/data.md), never the corpus.
"""

from __future__ import annotations

import apache_beam as beam

from components.corpus import minhash, readers
from components.corpus.documents import Document
from components.corpus.screen import DocumentScreen
from components.text_example_gen import mixture


class SignatureUnitFn(beam.DoFn):
    """Unit -> (band key, (unit index, ordinal, document id)), one per band of each document
    that exact dedup kept and the screen passes."""

    def __init__(self, config: readers.ReaderConfig, params: minhash.MinHashParams,
                 screen: DocumentScreen | None = None, filters: tuple[str, ...] = (),
                 sources: dict[str, mixture.SourceSpec] | None = None):
        """sources: a mixture's {name: SourceSpec}: each piece is read and screened with its
        source's settings (mixture.reading_of), as ConvertUnitFn does."""
        self._config, self._params, self._screen, self._filters = config, params, screen, filters
        self._sources = dict(sources or {})
        self._signer = None

    def setup(self):
        self._signer = minhash.Signer(self._params)

    def process(self, unit: readers.Unit, duplicates=None):
        if self._signer is None:  # a runner that never calls setup()
            self.setup()
        later_copies = frozenset((duplicates or {}).get(unit.index, ()))
        ordinal = -1
        for piece in unit.pieces:
            _, reader, filters = mixture.reading_of(self._sources, piece, self._config,
                                                    self._filters)
            for event in readers.read_piece(piece, reader):
                if not isinstance(event, Document):
                    continue
                ordinal += 1
                if ordinal in later_copies or self._screened(event.text, filters):
                    continue
                location = (unit.index, ordinal, event.id)
                for key in self._signer.band_keys(event.text):
                    yield key, location

    def _screened(self, text: bytes, filters: tuple[str, ...]) -> bool:
        """Whether the converter will skip text (ConvertUnitFn.screen_document's verdict)."""
        if self._screen is None:
            return False
        verdict = self._screen.check(text, filters)
        return verdict is not None and not verdict.keep


def bucket_edges(element):
    """(band key, members) -> (first member, other member) for each other member."""
    _, members = element
    first, *others = sorted(set(members))
    for other in others:
        yield first, other


def _root(parent: dict, node):
    path = []
    while parent.get(node, node) != node:
        path.append(node)
        node = parent[node]
    for visited in path:  # path compression
        parent[visited] = node
    return node


def _union(parent: dict, a, b) -> None:
    root_a, root_b = _root(parent, a), _root(parent, b)
    if root_a != root_b:
        low, high = min(root_a, root_b), max(root_a, root_b)
        parent[high] = low
        parent.setdefault(low, low)


class UnionFindFn(beam.CombineFn):
    """Edges -> sorted [(member, representative)] for every member that is not its cluster's
    first document (the smallest (unit, ordinal))."""

    def create_accumulator(self):
        return {}

    def add_input(self, parent, edge):
        _union(parent, *edge)
        return parent

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for other in accumulators:
            for node, parent in other.items():
                _union(merged, node, parent)
        return merged

    def extract_output(self, parent):
        return sorted((node, _root(parent, node)) for node in list(parent)
                      if _root(parent, node) != node)


def _by_unit(pair):
    (unit, ordinal, _), (_, _, representative_id) = pair
    return unit, (ordinal, representative_id)


class FindNearDuplicates(beam.PTransform):
    """PCollection[Unit] -> (unit index, [(ordinal, representative's document id) ...]) of the
    documents to skip as near duplicates. duplicates: FindDuplicates' output (exact first)."""

    def __init__(self, config: readers.ReaderConfig, params: minhash.MinHashParams,
                 duplicates=None, screen: DocumentScreen | None = None,
                 filters: tuple[str, ...] = (),
                 sources: dict[str, mixture.SourceSpec] | None = None):
        super().__init__()
        self._fn = SignatureUnitFn(config, params, screen, filters, sources)
        self._duplicates = duplicates

    def expand(self, units):
        side = {} if self._duplicates is None else {
            "duplicates": beam.pvalue.AsDict(self._duplicates)}
        return (units
                | "BandKeys" >> beam.ParDo(self._fn, **side)
                | "GroupBuckets" >> beam.GroupByKey()
                | "Edges" >> beam.FlatMap(bucket_edges)
                | "Clusters" >> beam.CombineGlobally(UnionFindFn())
                | "Members" >> beam.FlatMap(lambda members: members)
                | "ToUnit" >> beam.Map(_by_unit)
                | "ByUnit" >> beam.GroupByKey()
                | "AsLists" >> beam.MapTuple(lambda unit, items: (unit, sorted(items))))
