"""The tokenizer stage as a plain function: documents in, a tokenizer directory and figures out.
TokenizerGen (component.py) is a thin wrapper around `build_tokenizer`."""

from __future__ import annotations

import collections
import logging
from typing import Callable, Iterable

from components.corpus.documents import Document
from components.corpus.split_documents import read_split_documents
from components.tokenizer import training
from components.tokenizer.base import Tokenizer
from components.tokenizer.byte_level import ByteTokenizer
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer

log = logging.getLogger("bigtrain.tokenizer")


def build_tokenizer(data, output_dir: str,
                    documents_fn: Callable[..., Iterable[tuple[str, Document]]] = read_split_documents
                    ) -> tuple[Tokenizer, dict]:
    """Sample the train and eval documents of `data` (a DataConfig), train the configured
    tokenizer on the train sample, measure it on the eval sample, save it under output_dir.

    Both samples follow the same rule and budget (data.tokenizer_sample_bytes). Returns the
    tokenizer and its figures (also written to output_dir/tokenizer.json)."""
    skipped: collections.Counter = collections.Counter()
    samplers = {split: training.DocumentSampler(data.tokenizer_sample_bytes)
                for split in ("train", "eval")}
    for split, document in documents_fn(data, skipped):
        samplers[split].add(document.id, document.text.decode("utf-8"))
    train, evaluation = samplers["train"].sample(), samplers["eval"].sample()

    seconds = 0.0
    if data.tokenizer == "sentencepiece":
        proto, seconds = training.timed(
            training.train_sentencepiece, train.texts, data.vocab_size,
            data.tokenizer_model_type)
        tokenizer: Tokenizer = SentencePieceTokenizer(proto, model_type=data.tokenizer_model_type)
    elif data.tokenizer == "bytes":
        tokenizer = ByteTokenizer()
    else:
        raise training.TokenizerTrainingError(
            f"data.tokenizer: {data.tokenizer!r} is not one of ('bytes', 'sentencepiece')")
    if not evaluation.texts:
        raise training.TokenizerTrainingError(
            f"the eval split holds no text to measure the tokenizer on ({evaluation.documents_seen}"
            f" documents): use more input files or raise data.eval_fraction")
    measured = training.bytes_per_token(tokenizer, evaluation.texts)
    figures = {
        "kind": tokenizer.kind,
        "vocab_size": tokenizer.vocab_size,
        "bytes_per_token": measured["bytes_per_token"],
        "eval_sample_bytes": measured["bytes"],
        "eval_sample_tokens": measured["tokens"],
        "eval_sample_documents": measured["documents"],
        "sample_bytes": train.bytes,
        "sample_documents": len(train.texts),
        "train_documents_seen": train.documents_seen,
        "train_bytes_seen": train.bytes_seen,
        "documents_skipped": sum(skipped.values()),
        "training_seconds": round(seconds, 3),
    }
    tokenizer.save(output_dir, figures)
    log.info("tokenizer %s: %s", tokenizer.kind, figures)
    return tokenizer, figures
