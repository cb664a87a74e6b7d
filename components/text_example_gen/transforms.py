"""Beam transforms of the data stage: list -> plan work units -> convert each unit -> shards.

    files ─plan_units─▶ units ── ConvertUnits ──▶ pieces (per unit: one train piece, one eval
                                    piece per shard touched, one quarantine piece) ── OrderTrain
          ── AssembleShards ──▶ <out>/Split-<split>/data_tfrecord-SSSSS-of-NNNNN.gz + quarantine.jsonl

ConvertUnitFn streams one unit: read (readers.py) -> documents -> drop later copies of a document
(FindDuplicates, data.dedup=exact or near) -> drop near duplicates (cleaning.FindNearDuplicates,
data.dedup=near) -> screen (quality filters, decontamination: corpus/screen.py) -> split by
content (documents.py) -> pack
(packing.py) -> encode Examples in batches and write gzip pieces (shards.py). OrderTrain
(order.py) deals the train records into the shards in one seeded random order (its shuffle moves
references to ranges of each unit's spill file, never records; a bucket of ~8K records per
worker); eval pieces are only concatenated. No step groups documents or a split, so memory does not grow with the corpus.
Every input byte is counted once: packed, quarantined (with its reason and location in
the manifest) or a separator.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Callable

import apache_beam as beam
import numpy as np

from components.storage import fs
from components.config.cleaning import NearDedupConfig
from components.text_example_gen import properties as examples_props
from components.corpus import documents as docs
from components.corpus import minhash, readers
from components.corpus.documents import Document, Separator, Skipped
from components.corpus.screen import EVAL_SET_COUNTER, DocumentScreen, Verdict
from components.text_example_gen import cleaning, mixture, order, packing, shards, shares, unit_counts
from components.text_example_gen.exact_dedup import FindDuplicates
from components.tokenizer import artifact as tokenizer_artifact
from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID, encode_bytes

QUARANTINE_MANIFEST = "quarantine.jsonl"
SPLITS = ("train", "eval")
COUNTER_NAMES = list(examples_props.COUNTERS)   # the Examples' counter properties


# ----------------------------------------------------------------------------------------------
# DoFns.


class ConvertUnitFn(beam.DoFn):
    """Unit -> ((kind, split, shard), (unit index, piece path)) for each piece it wrote."""

    def __init__(self, config: readers.ReaderConfig, output_dir: str, *, seq_len: int,
                 eval_fraction: float, split_salt: str, num_shards: dict[str, int],
                 gzip_level: int = shards.GZIP_LEVEL,
                 tokenize: Callable[[bytes], np.ndarray] = encode_bytes,
                 tokenizer_dir: str | None = None,
                 sources: dict[str, mixture.SourceSpec] | None = None,
                 screen: DocumentScreen | None = None, filters: tuple[str, ...] = ()):
        """tokenizer_dir: a Tokenizer artifact's directory; each worker loads it once (setup) and
        tokenizes with it (only the path is pickled). None: `tokenize` (UTF-8 bytes).
        sources: {name: SourceSpec} of a mixture; a piece of a listed source is read with its
        reader settings, screened with its filters, packed by its weight and counted under its
        name (mixture.py); other pieces are read with `config`, packed once and not counted per
        source. screen, filters: the per-document screen and the data-level quality filters."""
        self._config, self._output_dir, self._seq_len = config, output_dir, seq_len
        self._sources = dict(sources or {})
        self._gzip_level = gzip_level
        self._eval_fraction, self._salt = eval_fraction, split_salt
        self._num_shards, self._tokenize = dict(num_shards), tokenize
        self._tokenizer_dir = tokenizer_dir
        self._specials = (PAD_ID, BOS_ID, EOS_ID)
        self._screen, self._filters = screen, tuple(filters)

    def setup(self):
        marker = os.environ.get("BIGTRAIN_TEST_PAUSE_IN_DATA_STAGE")
        if marker:   # fault-injection seam (tests/e2e/test_interrupts.py): a signal inside Beam
            fs.write_text(marker, str(os.getpid()))
            time.sleep(600)
        self._load_tokenizer()

    def _load_tokenizer(self):
        """Once per DoFn instance. Also called from process(): a runner that never calls setup()
        (Beam's DaskRunner) must not silently tokenize with UTF-8 bytes instead."""
        if self._tokenizer_dir is not None and not getattr(self, "_tokenizer_loaded", False):
            loaded = tokenizer_artifact.load(self._tokenizer_dir)
            self._tokenize = loaded.encode
            self._specials = (loaded.pad_id, loaded.bos_id, loaded.eos_id)
            self._tokenizer_loaded = True

    def process(self, unit: readers.Unit, duplicates=None, near_duplicates=None,
                train_tokens=None):
        """duplicates: {unit index: ordinals of its later-copy documents} (FindDuplicates);
        near_duplicates: {unit index: [(ordinal, representative id)]} (FindNearDuplicates);
        train_tokens: {source: its train tokens at weight 1} (shares.MeasureSources), the
        weights of a share mixture (mixture.share_weights)."""
        self._load_tokenizer()
        weights = mixture.share_weights(self._sources.values(), train_tokens or {})
        out = UnitWriter(unit.index, self._output_dir, self._num_shards, self._gzip_level,
                         pad_id=self._specials[0])
        try:
            with shards.naming_disk_full(self._output_dir):
                written = self._convert(unit, out, weights, duplicates, near_duplicates)
        except BaseException as error:   # a full disk: no temporary piece left, nor held open
            out.abort(error)
            raise
        yield from written

    def _convert(self, unit: readers.Unit, out: "UnitWriter", weights: dict[str, float],
                 duplicates, near_duplicates) -> list:
        """process() for one unit: its pieces written and closed, their keys and paths listed."""
        packers: dict[tuple[str, int], packing.Packer] = {}  # (split, copy) -> its stream
        for document, source in self.kept_documents(unit, out, duplicates, near_duplicates):
            self._pack(out, packers, document, source, weights)
        for split, copy in sorted(packers):
            out.write(split, packers[(split, copy)].finish())
        for split in SPLITS:
            out.write(split, None, final=True)
        written = list(out.close())
        # After the pieces: a unit's counts exist only once all it wrote does (unit_counts.py).
        unit_counts.write_counts(self._output_dir, unit.index, out.counts)
        return written

    def kept_documents(self, unit: readers.Unit, out, duplicates=None, near_duplicates=None):
        """(document, its source or None) of every document of the unit that passes dedup and
        the screen, in reading order; files, bytes, separators and skips are counted in `out`
        (a UnitWriter, or shares.Tally for the measuring pass). The one reading rule of both."""
        later_copies = frozenset((duplicates or {}).get(unit.index, ()))
        near = dict((near_duplicates or {}).get(unit.index, ()))
        ordinal = -1
        for piece in unit.pieces:
            out.counts["files_seen"] += piece.first
            file_problem = False
            source, reader, filters = mixture.reading_of(self._sources, piece, self._config,
                                                         self._filters)
            for event in readers.read_piece(piece, reader):
                if isinstance(event, Document):
                    ordinal += 1
                    if self._keep(out, event, ordinal in later_copies, near.get(ordinal),
                                  filters):
                        yield event, source
                elif isinstance(event, Skipped):
                    file_problem = out.quarantine(event) or file_problem
                elif isinstance(event, Separator):
                    out.counts["bytes_separators"] += event.bytes
                else:  # ("consumed", bytes read from the input)
                    out.counts["bytes_read"] += event[1]
            out.counts["files_read"] += piece.first and not file_problem

    def split_of(self, document: Document) -> str:
        return docs.split_of(document, self._eval_fraction, self._salt)

    def count_tokens(self, text: bytes) -> int:
        """Text tokens of a document (no BOS/EOS), as the packer counts them."""
        self._load_tokenizer()
        return len(self._tokenize(text))

    def _pack(self, out: "UnitWriter", packers: dict, document: Document,
              source: mixture.SourceSpec | None, weights: dict[str, float]) -> None:
        """Pack a document as often as its source's weight says (mixture.py; `weights`: those
        that meet a share mixture's shares), copy r into the stream of copy r; count it under
        its source."""
        split = self.split_of(document)
        copies = 1 if source is None else mixture.copies(
            document.text, source.name, weights.get(source.name, source.weight), split)
        if copies == 0:
            out.counts["documents_sampled_out"] += 1
            out.counts["bytes_sampled_out"] += document.source_bytes
            out.counts[mixture.counter_name(source.name, "sampled_out", split)] += 1
            return
        out.counts["documents_packed"] += 1
        out.counts["bytes_packed"] += document.source_bytes
        out.counts["documents_repeated"] += copies - 1
        for copy in range(copies):
            if (split, copy) not in packers:
                packers[(split, copy)] = packing.Packer(self._seq_len, self._tokenize, self._specials)
            out.write(split, packers[(split, copy)].add(document.text))
        if source is not None:
            tokens = packers[(split, 0)].last_tokens
            for measure, value in (("documents", copies), ("bytes", copies * document.source_bytes),
                                   ("tokens", copies * tokens), ("unique", 1)):
                out.counts[mixture.counter_name(source.name, measure, split)] += value

    def _keep(self, out: "UnitWriter", event: Document, later_copy: bool,
              representative: str | None, filters: tuple[str, ...]) -> bool:
        """Whether to pack a document; a skip is counted and listed. Order: exact copies, near
        duplicates (their cluster's pass already screened them), then the screen."""
        if later_copy:
            out.counts[f"documents_skipped_{docs.DUPLICATE}"] += 1
            out.counts["bytes_duplicate"] += event.source_bytes
            return False
        if representative is not None:
            out.quarantine(Skipped(event.id, docs.NEAR_DUPLICATE, event.source_bytes,
                                   f"near duplicate of {representative}"),
                           representative=representative)
            return False
        verdict = self.screen_document(event.text, filters)
        if verdict is None:
            return True
        out.screened(event, verdict, self._screen.eval_set_names)
        return verdict.keep

    def screen_document(self, text: bytes, filters: tuple[str, ...]) -> Verdict | None:
        """The one per-document screen: the named quality filters, then decontamination."""
        return None if self._screen is None else self._screen.check(text, filters)


class UnitWriter:
    """What ConvertUnitFn writes for one unit: packed windows batched into gzip pieces (one per
    shard touched), the quarantine manifest piece, and the unit's counts."""

    def __init__(self, unit_index: int, output_dir: str, num_shards: dict[str, int],
                 gzip_level: int, *, pad_id: int):
        self.unit_index, self.output_dir, self.num_shards = unit_index, output_dir, num_shards
        self.gzip_level, self.pad_id = gzip_level, pad_id
        self.counts = collections.Counter(dict.fromkeys(COUNTER_NAMES, 0))
        self.pending = {split: [] for split in SPLITS}
        self.batches = dict.fromkeys(SPLITS, 0)
        self.writers: dict[tuple[str, int], shards.PieceWriter] = {}
        self.written: dict[tuple[str, int], int] = {}   # records per piece
        self.manifest = shards.ManifestPieceWriter(os.path.join(
            output_dir, shards.PIECES_DIR, f"unit-{unit_index:06d}-quarantine.jsonl"))

    def write(self, split: str, windows: np.ndarray | None, final: bool = False) -> None:
        """Hold windows until a full batch (or the final call), then encode and write batches."""
        if windows is not None:
            self.pending[split].append(windows)
        held = sum(len(w) for w in self.pending[split])
        if not held or (held < shards.BATCH_SEQUENCES and not final):
            return
        block = np.concatenate(self.pending[split])
        self.pending[split] = []
        for begin in range(0, len(block), shards.BATCH_SEQUENCES):
            if len(block) - begin < shards.BATCH_SEQUENCES and not final:
                self.pending[split] = [block[begin:]]
                break
            self._write_batch(split, block[begin:begin + shards.BATCH_SEQUENCES])

    def _write_batch(self, split: str, batch: np.ndarray) -> None:
        # train: one piece per unit, ordered across the split by order.py; eval: batch j to a shard
        shard = 0 if split == order.SPLIT else shards.shard_for(
            self.unit_index, split, self.batches[split], self.num_shards[split])
        self.batches[split] += 1
        self.written[(split, shard)] = self.written.get((split, shard), 0) + len(batch)
        if (split, shard) not in self.writers:
            self.writers[(split, shard)] = shards.PieceWriter(
                shards.piece_path(self.output_dir, self.unit_index, split, shard), self.gzip_level)
        self.writers[(split, shard)].write(shards.framed_examples(batch))
        padding = int(np.count_nonzero(batch == self.pad_id))
        self.counts[f"sequences_{split}"] += len(batch)
        self.counts["tokens_padding"] += padding
        self.counts["tokens_real"] += batch.size - padding

    def quarantine(self, event: Skipped, **extra) -> bool:
        """Count a skipped file or document and record it in the manifest (with `extra` fields);
        True for a file."""
        is_file = event.reason in docs.FILE_REASONS
        if is_file:
            self.counts[f"files_skipped_{event.reason}"] += 1
        else:
            self.counts[f"documents_skipped_{event.reason}"] += event.records
        self.counts["bytes_quarantined"] += event.bytes
        self.manifest.write(dict(event.record(), **extra))
        return is_file

    def screened(self, event: Document, verdict: Verdict, eval_sets: tuple[str, ...]) -> None:
        """A document the screen skipped (quarantined) or flagged (packed, listed with
        "packed": true, its bytes not quarantined)."""
        for name in verdict.eval_sets:
            counter = f"{EVAL_SET_COUNTER}{eval_sets.index(name)}"
            self.counts[counter] = self.counts.get(counter, 0) + 1
        skipped = Skipped(event.id, verdict.reason, event.source_bytes, verdict.detail)
        if not verdict.keep:
            self.quarantine(skipped)
            return
        self.counts[f"documents_flagged_{verdict.reason}"] += 1
        self.manifest.write(dict(skipped.record(), packed=True))

    def abort(self, error: BaseException) -> None:
        """Writing failed with error: every piece still open is closed and removed."""
        for writer in [*self.writers.values(), self.manifest]:
            writer.abort(error)

    def close(self):
        """Close every piece; yields ((kind, split, shard), (unit index, piece path)), a train
        piece ((order.KIND, train, 0), (unit index, piece path, records))."""
        for (split, shard), writer in sorted(self.writers.items()):
            if split == order.SPLIT:
                yield (order.KIND, split, 0), (self.unit_index, writer.close(),
                                               self.written[(split, shard)])
            else:
                yield ("shard", split, shard), (self.unit_index, writer.close())
        if self.manifest.close():
            yield ("manifest", "", 0), (self.unit_index, self.manifest.path)


class AssembleFn(beam.DoFn):
    """((kind, split, shard), [(unit, piece path) ...]) -> the final file, pieces in unit order."""

    def __init__(self, output_dir: str, num_shards: dict[str, int]):
        self._output_dir, self._num_shards = output_dir, dict(num_shards)

    def process(self, element):
        (kind, split, shard), pieces = element
        ordered = [path for _, path in sorted(p for p in pieces if p is not None)]
        with shards.naming_disk_full(self._output_dir):
            if kind == "manifest":
                yield shards.concatenate(ordered, os.path.join(self._output_dir, QUARANTINE_MANIFEST))
            else:
                yield shards.concatenate(
                    ordered, shards.shard_path(self._output_dir, split, shard, self._num_shards[split]),
                    empty=shards.EMPTY_GZIP)


# ----------------------------------------------------------------------------------------------
# Composite transforms.


class ConvertUnits(beam.PTransform):
    """PCollection[Unit] -> piece records, one per piece file written. duplicates: the output of
    FindDuplicates (data.dedup=exact or near), or None to pack every copy; near_duplicates: the
    output of cleaning.FindNearDuplicates (data.dedup=near) or None; train_tokens: the output of
    shares.MeasureSources (a share mixture) or None."""

    def __init__(self, fn: ConvertUnitFn, duplicates=None, near_duplicates=None,
                 train_tokens=None):
        super().__init__()
        self._fn, self._duplicates, self._near = fn, duplicates, near_duplicates
        self._train_tokens = train_tokens

    def expand(self, units):
        side = {name: beam.pvalue.AsDict(collection) for name, collection in
                (("duplicates", self._duplicates), ("near_duplicates", self._near),
                 ("train_tokens", self._train_tokens)) if collection is not None}
        return units | "Spread" >> beam.Reshuffle() | "ReadPackWrite" >> beam.ParDo(self._fn, **side)


class AssembleShards(beam.PTransform):
    """Piece records -> every shard of every split (empty ones included) and the manifest."""

    def __init__(self, output_dir: str, num_shards: dict[str, int]):
        super().__init__()
        self._output_dir, self._num_shards = output_dir, dict(num_shards)

    def expand(self, pieces):
        every = ([(("shard", split, i), None) for split, n in sorted(self._num_shards.items())
                  for i in range(n)] + [(("manifest", "", 0), None)])
        placeholders = pieces.pipeline | "EveryOutput" >> beam.Create(every)
        return ((pieces, placeholders)
                | "WithEmptyShards" >> beam.Flatten()
                | "GroupPiecePaths" >> beam.GroupByKey()  # paths only, a few per unit
                | "Concatenate" >> beam.ParDo(AssembleFn(self._output_dir, self._num_shards)))


class TextToTFRecordShards(beam.PTransform):
    """The whole data stage on a PBegin: list of files in, shards and manifest out."""

    def __init__(self, files: list[tuple[str, str]], output_dir: str, *,
                 reader_config: readers.ReaderConfig, seq_len: int, eval_fraction: float,
                 split_salt: str, train_shards: int, eval_shards: int,
                 gzip_level: int = shards.GZIP_LEVEL,
                 tokenize: Callable[[bytes], np.ndarray] = encode_bytes,
                 tokenizer_dir: str | None = None, dedup: str = "exact",
                 sources: list[tuple[mixture.SourceSpec, list[tuple[str, str]]]] | None = None,
                 near_dedup: minhash.MinHashParams | None = None,
                 screen: DocumentScreen | None = None, filters: tuple[str, ...] = ()):
        """sources: a mixture, [(SourceSpec, its files)] in config order (`files` and
        `reader_config` then only read pieces outside it: none); None: `files`, read with
        `reader_config`, packed once each. dedup: exact | near | none; near_dedup: MinHash
        parameters (data.near_dedup's defaults when None); screen, filters: the per-document
        screen (corpus/screen.py) and the data-level quality filters."""
        super().__init__()
        self._units = (mixture.plan_mixture(sources) if sources is not None
                       else readers.plan_units(files, reader_config))
        self._sources = {spec.name: spec for spec, _ in sources or ()}
        self._reader_config, self._dedup = reader_config, dedup
        self._near_dedup = near_dedup or minhash.params_of(NearDedupConfig())
        self._screen, self._filters = screen, tuple(filters)
        num_shards = {"train": train_shards, "eval": eval_shards}
        self._convert = ConvertUnitFn(reader_config, output_dir, seq_len=seq_len,
                                      eval_fraction=eval_fraction, split_salt=split_salt,
                                      num_shards=num_shards, gzip_level=gzip_level,
                                      tokenize=tokenize, tokenizer_dir=tokenizer_dir,
                                      sources=self._sources, screen=screen,
                                      filters=self._filters)
        self._order = order.OrderTrain(output_dir, train_shards, gzip_level)
        self._assemble = AssembleShards(output_dir, num_shards)

    @property
    def units(self) -> int:
        """How many work units the stage plans (each writes its counts: unit_counts.py)."""
        return len(self._units)

    def expand(self, pbegin):
        units = pbegin | "PlanUnits" >> beam.Create(self._units)
        duplicates = (units | "FindDuplicates" >> FindDuplicates(self._reader_config, self._sources)
                      if self._dedup in ("exact", "near") else None)
        near = (units | "FindNearDuplicates" >> cleaning.FindNearDuplicates(
            self._reader_config, self._near_dedup, duplicates, self._screen, self._filters,
            self._sources) if self._dedup == "near" else None)
        train_tokens = (units | "MeasureSources" >> shares.MeasureSources(
            self._convert, duplicates, near)
            if any(spec.share is not None for spec in self._sources.values()) else None)
        return (units
                | "ConvertUnits" >> ConvertUnits(self._convert, duplicates, near, train_tokens)
                | "OrderTrain" >> self._order
                | "AssembleShards" >> self._assemble)
