"""A Tokenizer artifact on disk: loading the tokenizer a directory holds, and where an Examples
artifact keeps the tokenizer its ids come from (TextExampleGen copies it there, so the Trainer and
the Evaluator, which see only the examples, use exactly that tokenizer)."""

from __future__ import annotations

from components.storage import fs
import json
import os

from components.tokenizer.base import (DESCRIPTION_FILE, KINDS, LEGACY_DESCRIPTION_FILE, MODEL_FILE,
                                       Tokenizer, TokenizerFileError)
from components.tokenizer.byte_level import ByteTokenizer
from components.tokenizer.sentencepiece_model import SentencePieceTokenizer

TOKENIZER_SUBDIR = "tokenizer"


def load(directory: str) -> Tokenizer:
    """The tokenizer saved under directory (a Tokenizer artifact's uri; one written before the
    description's rename holds LEGACY_DESCRIPTION_FILE instead)."""
    path = os.path.join(directory, DESCRIPTION_FILE)
    try:
        description = json.loads(_read_description(directory))
    except FileNotFoundError:
        raise TokenizerFileError(f"tokenizer description {path} does not exist (is {directory} "
                                 "a Tokenizer artifact written by TokenizerGen?)") from None
    except (OSError, ValueError) as err:
        raise TokenizerFileError(f"tokenizer description {path} is unreadable: {err}") from None
    kind = description.get("kind") if isinstance(description, dict) else None
    if kind == "bytes":
        return ByteTokenizer()
    if kind == "sentencepiece":
        return SentencePieceTokenizer.from_file(os.path.join(directory, MODEL_FILE))
    raise TokenizerFileError(f"tokenizer description {path}: kind {kind!r} is not one of {KINDS}")


def _read_description(directory: str) -> str:
    try:
        return fs.read_text(os.path.join(directory, DESCRIPTION_FILE))
    except FileNotFoundError:
        return fs.read_text(os.path.join(directory, LEGACY_DESCRIPTION_FILE))


def examples_tokenizer_dir(examples_uri: str) -> str:
    """Where an Examples artifact keeps the tokenizer its ids come from (absent: UTF-8 bytes)."""
    return os.path.join(examples_uri, TOKENIZER_SUBDIR)


def examples_tokenizer(examples_uri: str, data=None, where: str = "") -> Tokenizer:
    """The Tokenizer an Examples artifact's ids come from: the one TextExampleGen copied beside
    the shards, else the byte tokenizer (byte-level examples carry none). With the run's
    DataConfig, checked against it: data.tokenizer=sentencepiece needs the files (a missing or
    corrupt one is a TokenizerFileError naming it), and the vocabulary must be the config's."""
    from components.tokenizer import spec as spec_lib
    directory = examples_tokenizer_dir(examples_uri)
    if not fs.isdir(directory) and (data is None or data.tokenizer == "bytes"):
        return ByteTokenizer()
    tokenizer = load(directory)
    if data is not None:
        spec_lib.check(tokenizer, spec_lib.token_spec(data), f"{where} (tokenizer {directory})")
    return tokenizer
