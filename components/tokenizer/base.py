"""The tokenizer interface and its on-disk form (what a Tokenizer artifact's directory holds).

A tokenizer maps text to int ids and back, in Python (the data stage's Beam workers, evaluation)
and inside the TensorFlow graph (the exported SavedModel), with the same ids both ways. Special
ids: `pad_id` fills the tail of a bucket and is never a training target, `bos_id` starts and
`eos_id` ends every document.

Directory layout (written by `save`, read by artifact.load), the one place that names it:
    bigtrain_tokenizer.json   DESCRIPTION_FILE: kind, vocab_size, special ids, figures (always);
                              artifacts written before it had this name hold LEGACY_DESCRIPTION_FILE,
                              which readers fall back to (Hugging Face's tokenizer.json is
                              another format: components/serving/hf)
    tokenizer.model   MODEL_FILE: serialized SentencePiece ModelProto (sentencepiece only; the
                      Hugging Face layout ships the same file under the same name)
    tokenizer.vocab   VOCAB_FILE: one `piece<TAB>score` line per id, for people (sentencepiece only)
"""

from __future__ import annotations

from components.storage import fs
import abc
import json
import os
from typing import Any

import numpy as np

DESCRIPTION_FILE = "bigtrain_tokenizer.json"
LEGACY_DESCRIPTION_FILE = "tokenizer.json"   # the description's name before bigtrain_tokenizer.json
MODEL_FILE = "tokenizer.model"
VOCAB_FILE = "tokenizer.vocab"
KINDS = ("bytes", "sentencepiece")


class TokenizerFileError(ValueError):
    """A tokenizer file is missing, unreadable or not what it claims to be. Names the file."""


class Tokenizer(abc.ABC):
    kind: str

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of ids; every id is in [0, vocab_size)."""

    pad_id: int
    bos_id: int
    eos_id: int

    @abc.abstractmethod
    def encode(self, text: str | bytes) -> np.ndarray:
        """Text (str, or UTF-8 bytes) -> int64 ids, no specials added."""

    @abc.abstractmethod
    def decode(self, ids) -> bytes:
        """Ids -> UTF-8 bytes; pad, bos and eos are dropped."""

    @abc.abstractmethod
    def in_graph(self):
        """A tf.Module with `tokenize(string[B]) -> RaggedTensor int32 [B, None]` and
        `detokenize(RaggedTensor int32 [B, None]) -> string[B]`, built from TensorFlow ops only
        (plus tensorflow-text's SentencePiece ops), to be tracked by the exported model."""

    @abc.abstractmethod
    def token_byte_lengths(self) -> np.ndarray:
        """int64 [vocab_size]: UTF-8 bytes each id stands for (0 for pad, bos, eos). The raw bytes
        under any ids are lengths[ids].sum(), so packed eval windows give bits per byte without
        the original text: bits/byte = sum of target losses / lengths[targets].sum() / ln 2."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the tokenizer is, as JSON-able values (written to DESCRIPTION_FILE and MLMD)."""

    def document_ids(self, data: str | bytes) -> np.ndarray:
        """One document as it enters the packed stream: [BOS] ids [EOS]."""
        ids = self.encode(data)
        out = np.empty(len(ids) + 2, dtype=np.int64)
        out[0], out[1:-1], out[-1] = self.bos_id, ids, self.eos_id
        return out

    def special_ids(self) -> dict[str, int]:
        return {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}

    def save(self, directory: str, figures: dict[str, Any] | None = None) -> str:
        """Write the tokenizer's files under directory; returns the description file's path."""
        fs.makedirs(directory)
        self._save_files(directory)
        path = os.path.join(directory, DESCRIPTION_FILE)
        fs.write_text(path, json.dumps(dict(self.describe(), figures=dict(figures or {})),
                                       indent=2, sort_keys=True))
        return path

    def _save_files(self, directory: str) -> None:  # the byte tokenizer has no files of its own
        pass
