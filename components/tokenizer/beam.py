"""Tokenizing in Beam workers with a Tokenizer artifact: the DoFn the data stage plugs in.

The DoFn carries only the artifact's directory; each worker loads the tokenizer once (setup), so
nothing large is pickled with the pipeline and every worker uses exactly the artifact's model.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from components.tokenizer import base

NAMESPACE = "bigtrain.tokenizer"
QUARANTINE = "quarantine"
UNTOKENIZABLE = "not_utf8"  # the only input a tokenizer refuses (SentencePiece reads UTF-8)


class TokenizeDocumentFn(beam.DoFn):
    """(key, (document_id, bytes)) -> (key, (document_id, int64 ids [BOS] ... [EOS])), or a
    quarantine record {path, reason, bytes, detail} on the 'quarantine' output."""

    def __init__(self, tokenizer_dir: str):
        self._tokenizer_dir = tokenizer_dir
        self._tokenizer = None
        self._documents = Metrics.counter(NAMESPACE, "documents_tokenized")
        self._bytes = Metrics.counter(NAMESPACE, "bytes_tokenized")
        self._tokens = Metrics.counter(NAMESPACE, "tokens")  # without bos/eos
        self._refused = Metrics.counter(NAMESPACE, "documents_untokenizable")

    def setup(self):
        self._tokenizer = base.load(self._tokenizer_dir)

    def process(self, element):
        key, (document_id, data) = element
        try:
            ids = self._tokenizer.document_ids(data)
        except ValueError as err:  # invalid UTF-8 for SentencePiece: counted, kept, not lost
            self._refused.inc()
            yield beam.pvalue.TaggedOutput(QUARANTINE, {
                "path": document_id, "reason": UNTOKENIZABLE, "bytes": len(data),
                "detail": str(err)})
            return
        self._documents.inc()
        self._bytes.inc(len(data))
        self._tokens.inc(len(ids) - 2)
        yield key, (document_id, ids)
