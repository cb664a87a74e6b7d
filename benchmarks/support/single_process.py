"""Single-process references of what the Beam stages do, for tests and benchmarks to compare with:
every packable document of a DataConfig with its split (what the data stage and TokenizerGen's
sample read), and the tokenizer sample of a list of documents (the sample rule of
components/tokenizer/sampling.py, applied in one loop)."""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, Iterator

from components.storage.listing import list_input_files
from components.corpus import documents, readers
from components.corpus.split_documents import reader_config
from components.tokenizer.sampling import SAMPLE_SALT, Sample, SampleAccumulator, candidate


def read_split_documents(data, skipped: collections.Counter | None = None
                         ) -> Iterator[tuple[str, documents.Document]]:
    """(split, Document) for every packable document. Quarantined files and documents are
    counted in `skipped` by reason (a file-level skip is one file, as the data stage counts it),
    never silently lost."""
    skipped = skipped if skipped is not None else collections.Counter()
    listed = [(source.name, reader_config(data, source),
               list_input_files(source.input, source.exclude)[1]) for source in data.mixture()]
    configs = {name: config for name, config, _ in listed}
    # data.dedup=exact: the first copy in reading order (the one the data stage packs) is kept.
    # Memory: one 32-byte digest per distinct document (the Beam stage keeps them in its shuffle).
    seen: set[bytes] | None = set() if getattr(data, "dedup", "exact") in ("exact", "near") else None
    for unit in readers.plan_sources(listed):
        for piece in unit.pieces:
            for event in readers.read_piece(piece, configs[piece.source]):
                if isinstance(event, documents.Document):
                    key = documents.content_key(event.text)
                    if seen is not None:
                        if bytes.fromhex(key) in seen:
                            skipped[documents.DUPLICATE] += 1
                            continue
                        seen.add(bytes.fromhex(key))
                    yield documents.split_for(key, data.eval_fraction, data.split_salt), event
                elif isinstance(event, documents.Skipped):
                    file_level = event.reason in documents.FILE_REASONS
                    skipped[event.reason] += 1 if file_level else event.records


def sample_documents(documents: Iterable[tuple[str, str]], max_bytes: int, dedup: bool = False,
                     salt: str = SAMPLE_SALT) -> Sample:
    """(document id, text) pairs in reading order -> the sample (see the module docstring), with
    documents_seen/bytes_seen over every document given."""
    accumulator, seen, seen_bytes = SampleAccumulator(max_bytes, dedup), 0, 0
    for ordinal, (document_id, text) in enumerate(documents):
        raw = text.encode("utf-8")
        seen, seen_bytes = seen + 1, seen_bytes + len(raw)
        accumulator.add(candidate(document_id, raw, (0, ordinal), salt=salt))
    return dataclasses.replace(accumulator.sample(), documents_seen=seen, bytes_seen=seen_bytes)
