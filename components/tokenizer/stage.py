"""The tokenizer stage as a plain function: documents in, a tokenizer directory and figures out.
TokenizerGen (component.py) is a thin wrapper around `build_tokenizer`; the sample is read by a
Beam pipeline (sample_pipeline.py) on the runner the stage is given."""

from __future__ import annotations

import logging
from typing import Callable

from components.tokenizer import sample_pipeline, training
from components.tokenizer.base import Tokenizer
from components.tokenizer.byte_level import ByteTokenizer
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer

log = logging.getLogger("bigtrain.tokenizer")


def build_tokenizer(data, output_dir: str, make_pipeline: Callable | None = None
                    ) -> tuple[Tokenizer, dict]:
    """Sample the train and eval documents of `data` (a DataConfig), train the configured
    tokenizer on the train sample, measure it on the eval sample, save it under output_dir.

    Both samples follow the same rule and budget (data.tokenizer_sample_bytes). make_pipeline:
    a new Beam pipeline for the sample read (the executor's, with its beam_pipeline_args; default
    the DirectRunner). Returns the tokenizer and its figures (also in output_dir's description file, base.DESCRIPTION_FILE)."""
    if make_pipeline is None:
        import apache_beam as beam
        make_pipeline = beam.Pipeline
    samples, skipped = sample_pipeline.read_samples(data, output_dir, make_pipeline)
    train, evaluation = samples["train"], samples["eval"]

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
