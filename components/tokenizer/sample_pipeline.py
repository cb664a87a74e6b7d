"""TokenizerGen's sample, read in Beam: the corpus readers on the data stage's work units, in
parallel, on whatever runner the stage's beam_pipeline_args name (the DirectRunner, a portable
runner, Beam's DaskRunner).

    files ─plan_units─▶ units ─Reshuffle─▶ CandidatesFn (readers.read_piece, split by content)
        ├─ (split, the unit's sample) ── CombinePerKey(SampleCombineFn) ──▶ <staging>/<split>.json
        ├─ (documents, [(digest, first-copy record)]) ── CountDocuments ──┐
        └─ (figure, count) of quarantined records ───────────────────────┴─▶ <staging>/figures.json

The sample rule (sampling.py) depends only on the documents, so the sample, and the SentencePiece
model trained on it, are the same bytes whatever the runner, bundling or parallelism. Only
accumulators (at most about 2 x data.tokenizer_sample_bytes of text each, one per unit and split)
and one digest per document (as the data stage shuffles them) travel between workers.

Forms every runner carries (Beam's DaskRunner, 2.72, hands every output of a DoFn, tagged or
not, to each consumer, and computes a side input by running its whole upstream again in a
worker): CandidatesFn has one output, a few elements per unit told apart by their key, and no
step reads a side input.
"""

from __future__ import annotations

import collections
import json
from typing import Callable

import apache_beam as beam
from apache_beam.metrics import Metrics

from components.storage import fs
from components.storage.listing import list_sources
from components.corpus import documents as docs
from components.corpus import readers
from components.corpus.split_documents import reader_config
from components.tokenizer import sampling

NAMESPACE = "bigtrain.tokenizer"
SPLITS = ("train", "eval")
STAGING_DIR = "sample-staging"   # under the output folder, removed once read
DOCUMENTS = "documents"          # the key of a unit's per-document records (CandidatesFn)


class CandidatesFn(beam.DoFn):
    """Unit -> per unit, from one output: (DOCUMENTS, [(digest bytes, (unit, ordinal, split
    index, size)) per document]), (split, SampleAccumulator of the unit's documents) per split
    that has some, and ("skipped_<reason>", count) per quarantine reason; the kinds told apart by
    their key. The unit's own accumulator drops most documents before they become elements."""

    def __init__(self, config: readers.ReaderConfig, eval_fraction: float, split_salt: str,
                 max_bytes: int, dedup: bool,
                 readers_by_source: dict[str, readers.ReaderConfig] | None = None):
        """readers_by_source: a mixture's reader settings by source name (Piece.source); a
        piece of another source is read with `config`."""
        self._config, self._eval_fraction, self._salt = config, eval_fraction, split_salt
        self._readers = dict(readers_by_source or {})
        self._max_bytes, self._dedup = max_bytes, dedup
        self._skipped = Metrics.counter(NAMESPACE, "records_skipped")

    def process(self, unit: readers.Unit):
        samples = {split: sampling.SampleAccumulator(self._max_bytes, self._dedup)
                   for split in SPLITS}
        skipped, records = collections.Counter(), []
        for piece in unit.pieces:
            for event in readers.read_piece(piece, self._readers.get(piece.source, self._config)):
                if isinstance(event, docs.Document):
                    digest = docs.content_key(event.text)
                    split = docs.split_for(digest, self._eval_fraction, self._salt)
                    position = (unit.index, len(records))
                    if samples[split].wants(sampling.sample_key(digest)):
                        samples[split].add(sampling.candidate(event.id, event.text, position, digest))
                    # Flat and small (what travels per document): digest bytes, then
                    # (unit, ordinal, split index, size).
                    records.append((bytes.fromhex(digest), (
                        unit.index, position[1], SPLITS.index(split), len(event.text))))
                elif isinstance(event, docs.Skipped):
                    skipped[f"skipped_{event.reason}"] += (
                        1 if event.reason in docs.FILE_REASONS else event.records)
        yield DOCUMENTS, records
        for split, accumulator in samples.items():
            if accumulator.held:
                accumulator.compact()
                yield split, accumulator
        self._skipped.inc(sum(skipped.values()))
        yield from sorted(skipped.items())


class SampleCombineFn(beam.CombineFn):
    """Per-unit accumulators -> the sample's [(document id, text)] in key order
    (sampling.SampleAccumulator: associative and order-free, so any bundling gives the same
    result)."""

    def __init__(self, max_bytes: int, dedup: bool):
        self._max_bytes, self._dedup = max_bytes, dedup

    def create_accumulator(self):
        return sampling.SampleAccumulator(self._max_bytes, self._dedup)

    def add_input(self, accumulator, unit_sample):
        return accumulator.merge(unit_sample)

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for other in accumulators:
            merged.merge(other)
        return merged

    def compact(self, accumulator):
        accumulator.compact()
        return accumulator

    def extract_output(self, accumulator):
        sample = accumulator.sample()
        return list(zip(sample.document_ids, sample.texts))


class FirstCopyFn(beam.CombineFn):
    """(unit, ordinal, split index, size) records of one content -> (the first in reading order,
    copies)."""

    def create_accumulator(self):
        return None, 0

    def add_input(self, accumulator, record):
        first, copies = accumulator
        record = tuple(record)
        return (record if first is None or record < first else first), copies + 1

    def merge_accumulators(self, accumulators):
        first, copies = None, 0
        for other, n in accumulators:
            if other is not None and (first is None or tuple(other) < first):
                first = tuple(other)
            copies += n
        return first, copies

    def extract_output(self, accumulator):
        return accumulator


def _seen_figures(first_and_copies):
    (_, _, split_index, size), copies = first_and_copies
    split = SPLITS[split_index]
    yield f"documents_seen_{split}", 1
    yield f"bytes_seen_{split}", size
    if copies > 1:
        yield f"skipped_{docs.DUPLICATE}", copies - 1


class CountDocuments(beam.PTransform):
    """Per-document records -> (figure, count): documents and bytes per split, duplicates (dedup=exact:
    only the first copy of a content counts, as the data stage packs only it)."""

    def __init__(self, dedup: bool):
        super().__init__()
        self._dedup = dedup

    def expand(self, seen):
        if self._dedup:
            firsts = seen | "FirstCopies" >> beam.CombinePerKey(FirstCopyFn()) | beam.Values()
        else:
            firsts = seen | "EveryCopy" >> beam.Map(lambda kv: (kv[1], 1))
        return firsts | "Figures" >> beam.FlatMap(_seen_figures)


class WriteJsonFn(beam.DoFn):
    """(name, value) -> <staging>/<name>.json, written whole (a retry writes the same bytes)."""

    def __init__(self, staging_dir: str):
        self._staging_dir = staging_dir

    def process(self, element):
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems
        name, value = element
        with FileSystems.create(fs.join(self._staging_dir, f"{name}.json"),
                                compression_type=CompressionTypes.UNCOMPRESSED) as out:
            out.write(json.dumps(value, sort_keys=True).encode("utf-8"))
        yield name


class ReadSample(beam.PTransform):
    """PBegin -> ("train" | "eval", [(document id, text)]) per split that has documents, and
    ("figures", {documents_seen_<split>, bytes_seen_<split>, skipped_<reason>: count}) unless
    nothing was read or skipped."""

    def __init__(self, files: list[tuple[str, str]], *, config: readers.ReaderConfig,
                 eval_fraction: float, split_salt: str, max_bytes: int, dedup: bool,
                 sources: list[tuple[str, readers.ReaderConfig, list[tuple[str, str]]]] | None = None):
        """sources: a mixture, (name, reader settings, files) per source (readers.plan_sources;
        `files` unused); None: `files` read with `config`."""
        super().__init__()
        self._units = (readers.plan_sources(sources) if sources is not None
                       else readers.plan_units(files, config))
        self._read = CandidatesFn(config, eval_fraction, split_salt, max_bytes, dedup,
                                  {name: reader for name, reader, _ in sources or ()})
        self._combine = SampleCombineFn(max_bytes, dedup)
        self._dedup = dedup

    def expand(self, pbegin):
        read = (pbegin
                | "PlanUnits" >> beam.Create(self._units)
                | "Spread" >> beam.Reshuffle()
                | "Read" >> beam.ParDo(self._read))
        # Filters of the per-unit elements, not tagged outputs or a Partition, and
        # without_defaults (no side input): the forms Beam's DaskRunner carries (the module's doc).
        samples = (read | "Samples" >> beam.Filter(lambda element: element[0] in SPLITS)
                   | "Sample" >> beam.CombinePerKey(self._combine))
        documents = (read | "Documents" >> beam.Filter(lambda element: element[0] == DOCUMENTS)
                     | "EachDocument" >> beam.FlatMap(lambda element: element[1]))
        skipped = read | "Skipped" >> beam.Filter(
            lambda element: element[0] not in SPLITS and element[0] != DOCUMENTS)
        figures = ((documents | "CountDocuments" >> CountDocuments(self._dedup), skipped)
                   | "AllFigures" >> beam.Flatten()
                   | "SumFigures" >> beam.CombinePerKey(sum)
                   | "AsDict" >> beam.CombineGlobally(
                       beam.combiners.ToDictCombineFn()).without_defaults()
                   | "Named" >> beam.Map(lambda figures: ("figures", figures)))
        return (samples, figures) | "Outputs" >> beam.Flatten()


class SampleDocuments(beam.PTransform):
    """PBegin -> <staging>/train.json, eval.json (the samples) and figures.json."""

    def __init__(self, files: list[tuple[str, str]], staging_dir: str, **settings):
        super().__init__()
        self._read, self._staging_dir = ReadSample(files, **settings), staging_dir

    def expand(self, pbegin):
        return (pbegin
                | "ReadSample" >> self._read
                | "Write" >> beam.ParDo(WriteJsonFn(self._staging_dir)))


def read_samples(data, output_dir: str, make_pipeline: Callable[[], beam.Pipeline]
                 ) -> tuple[dict[str, sampling.Sample], collections.Counter]:
    """Run SampleDocuments for a DataConfig on a pipeline from make_pipeline (the stage's
    beam_pipeline_args); returns ({split: Sample}, quarantined records by reason)."""
    sources = [(source.name, reader_config(data, source), files)
               for source, _, files in list_sources(data)]
    staging = fs.join(output_dir, STAGING_DIR)
    fs.rmtree(staging)   # a retried execution's leftovers
    pipeline = make_pipeline()
    _ = pipeline | "SampleDocuments" >> SampleDocuments(
        [], staging, config=reader_config(data), sources=sources, eval_fraction=data.eval_fraction,
        split_salt=data.split_salt, max_bytes=data.tokenizer_sample_bytes,
        dedup=getattr(data, "dedup", "exact") in ("exact", "near"))  # near: exact first
    pipeline.run().wait_until_finish()
    figures_path = fs.join(staging, "figures.json")   # absent: nothing read, nothing skipped
    figures = json.loads(fs.read_text(figures_path)) if fs.exists(figures_path) else {}
    samples = {}
    for split in SPLITS:
        path = fs.join(staging, f"{split}.json")
        pairs = json.loads(fs.read_text(path)) if fs.exists(path) else []  # absent: no document
        samples[split] = sampling.Sample(
            [text for _, text in pairs], [document_id for document_id, _ in pairs],
            sum(len(text.encode("utf-8")) for _, text in pairs),
            figures.get(f"documents_seen_{split}", 0), figures.get(f"bytes_seen_{split}", 0))
    fs.rmtree(staging)
    skipped = collections.Counter({name[len("skipped_"):]: n for name, n in figures.items()
                                   if name.startswith("skipped_")})
    return samples, skipped
