"""Training SentencePiece on the deterministic sample (sampling.py), and the figures that describe
it."""

from __future__ import annotations

import io
import re
import time
from typing import Iterable, Sequence

from components.tokenizer.sampling import TokenizerTrainingError  # noqa: F401 (re-exported)

MODEL_TYPES = ("unigram", "bpe")
SPECIAL_PIECES = 4            # pad 0, unk 1, bos 2, eos 3
BYTE_PIECES = 256             # byte fallback: <0x00> .. <0xFF>
MIN_VOCAB_SIZE = BYTE_PIECES + SPECIAL_PIECES + 1
CHARACTER_COVERAGE = 0.9995   # rarer characters are spelled with byte pieces
MAX_SENTENCE_BYTES = 8192     # SentencePiece skips longer training sentences: we cut lines first
# SentencePiece's unigram EM splits its sentences over threads and sums per-thread float
# statistics: 1, 2 and 8 threads gave different vocabularies. Fixed, not min(cpu_count, 8).
TRAINING_THREADS = 1


def training_sentences(texts: Iterable[str]) -> Iterable[str]:
    """Documents -> lines (newlines are spelled with a byte piece), long lines cut so that
    SentencePiece does not skip them silently."""
    for text in texts:
        for line in text.split("\n"):
            # Pieces of MAX_SENTENCE_BYTES // 4 characters: at most MAX_SENTENCE_BYTES bytes.
            for start in range(0, len(line), MAX_SENTENCE_BYTES // 4):
                yield line[start:start + MAX_SENTENCE_BYTES // 4]


_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_SMALL = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")


def train_sentencepiece(texts: Sequence[str], vocab_size: int, model_type: str = "unigram", *,
                        vocab_setting: str = "data.vocab_size",
                        sample_setting: str = "data.tokenizer_sample_bytes") -> bytes:
    """Train on texts; returns the serialized ModelProto. Byte fallback on, identity
    normalization, no dummy prefix, whitespace kept as it is: every text without U+2581
    round-trips. One thread (TRAINING_THREADS): the unigram trainer's result depends on the
    thread count, so the same sample gives the same model bytes on every machine.
    Raises TokenizerTrainingError naming the setting to change."""
    import sentencepiece as spm
    if model_type not in MODEL_TYPES:
        raise TokenizerTrainingError(f"data.tokenizer_model_type: {model_type!r} is not one of "
                                     f"{MODEL_TYPES}")
    if vocab_size < MIN_VOCAB_SIZE:
        raise TokenizerTrainingError(
            f"{vocab_setting}={vocab_size} is below the byte-fallback minimum: {BYTE_PIECES} byte "
            f"pieces + {SPECIAL_PIECES} special ids (pad, unk, bos, eos) + the sample's characters "
            f"(at least 1) = {MIN_VOCAB_SIZE} or more")
    sample_bytes = sum(len(t.encode("utf-8")) for t in texts)
    if not any(t.strip() for t in texts):
        raise TokenizerTrainingError(
            f"the tokenizer's training sample has no text ({len(texts)} documents, {sample_bytes} "
            f"bytes): check data.input and that the train split holds text files "
            f"({sample_setting} sets the sample size)")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(training_sentences(texts)), model_writer=model,
            vocab_size=vocab_size, model_type=model_type, byte_fallback=True,
            character_coverage=CHARACTER_COVERAGE, normalization_rule_name="identity",
            add_dummy_prefix=False, remove_extra_whitespaces=False,
            allow_whitespace_only_pieces=True, split_digits=False,
            max_sentence_length=MAX_SENTENCE_BYTES, input_sentence_size=0,
            pad_id=0, unk_id=1, bos_id=2, eos_id=3,
            num_threads=TRAINING_THREADS, minloglevel=2)
    except RuntimeError as err:
        message = str(err)
        if match := _TOO_HIGH.search(message):
            raise TokenizerTrainingError(
                f"{vocab_setting}={vocab_size} is larger than the training sample supports (at "
                f"most {match.group(2)} pieces from {len(texts)} documents, {sample_bytes} bytes):"
                f" lower {vocab_setting} or raise {sample_setting}") from None
        if match := _TOO_SMALL.search(message):
            raise TokenizerTrainingError(
                f"{vocab_setting}={vocab_size} is below the byte-fallback minimum for this sample: "
                f"{BYTE_PIECES} byte pieces + {SPECIAL_PIECES} special ids + "
                f"{int(match.group(2)) - BYTE_PIECES - SPECIAL_PIECES} characters covering "
                f"{CHARACTER_COVERAGE:.2%} of the text = {match.group(2)}; raise {vocab_setting} to "
                f"at least {match.group(2)}") from None
        raise RuntimeError(f"SentencePiece training failed ({vocab_setting}={vocab_size}, "
                           f"model type {model_type}, {sample_bytes} bytes): {message}") from err
    return model.getvalue()


def bytes_per_token(tokenizer, texts: Iterable[str]) -> dict:
    """UTF-8 bytes per token (no specials) over texts: the compression a tokenizer buys."""
    total_bytes = total_tokens = documents = 0
    for text in texts:
        total_bytes += len(text.encode("utf-8"))
        total_tokens += len(tokenizer.encode(text))
        documents += 1
    return {"bytes": total_bytes, "tokens": total_tokens, "documents": documents,
            "bytes_per_token": round(total_bytes / total_tokens, 6) if total_tokens else 0.0}


def timed(fn, *args, **kwargs):
    start = time.monotonic()
    result = fn(*args, **kwargs)
    return result, time.monotonic() - start
