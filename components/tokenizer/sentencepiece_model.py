"""The SentencePiece tokenizer (unigram or BPE, byte fallback on).

Python side: the `sentencepiece` library. Graph side: tensorflow-text's SentencepieceTokenizer,
whose op carries the serialized model proto as an attribute, so the SavedModel is self-contained
(no asset file to ship). Loading such a SavedModel needs the tensorflow-text ops registered in
the loading process: `import tensorflow_text` in Python; TF Serving's model server links them in.

Round trip: with byte fallback, identity normalization, no dummy prefix and no whitespace
collapsing, decode(encode(s)) == s for every str s without U+2581 ("▁"): SentencePiece uses that
character for the space and decodes it as one (a limitation of the library, docs/tokenizers.md).
"""

from __future__ import annotations

from components.storage import fs
import hashlib
import os

import numpy as np

from components.tokenizer.base import MODEL_FILE, VOCAB_FILE, Tokenizer, TokenizerFileError

# Probe text a round-trip-safe model must reproduce exactly (NFKC would fold the fullwidth A,
# whitespace collapsing the double space, a dummy prefix the leading space).
_ROUND_TRIP_PROBE = " lead  A\uff21 caf\u00e9\t\r\n\U0001f600 \x01"


def _processor(model_proto: bytes, source: str):
    import sentencepiece as spm
    try:
        return spm.SentencePieceProcessor(model_proto=model_proto)
    except (RuntimeError, OSError, TypeError) as err:
        raise TokenizerFileError(f"{source}: not a SentencePiece model ({type(err).__name__}: "
                                 f"{str(err).strip() or 'cannot parse the model proto'})") from None


class SentencePieceTokenizer(Tokenizer):
    kind = "sentencepiece"

    def __init__(self, model_proto: bytes, source: str = "<in-memory model>",
                 model_type: str | None = None):
        self.model_proto = bytes(model_proto)
        self.source = source
        self.model_type = model_type
        self._sp = _processor(self.model_proto, source)
        self.pad_id, self.bos_id, self.eos_id = self._sp.pad_id(), self._sp.bos_id(), self._sp.eos_id()
        missing = [n for n, i in (("pad", self.pad_id), ("bos", self.bos_id), ("eos", self.eos_id))
                   if i < 0]
        if missing:
            raise TokenizerFileError(f"{source}: the SentencePiece model has no {', '.join(missing)} "
                                     "id (train it with pad_id, bos_id and eos_id set)")
        byte_ids = [self._sp.piece_to_id(f"<0x{b:02X}>") for b in range(256)]
        if not all(self._sp.is_byte(i) for i in byte_ids):
            raise TokenizerFileError(f"{source}: the SentencePiece model was trained without "
                                     "byte_fallback, so not every text can be encoded")
        if self._sp.decode(self._sp.encode(_ROUND_TRIP_PROBE)) != _ROUND_TRIP_PROBE:
            raise TokenizerFileError(f"{source}: the SentencePiece model does not reproduce its "
                                     "input (normalization, dummy prefix or whitespace collapsing "
                                     "is on); train it with normalization_rule_name=identity, "
                                     "add_dummy_prefix=false, remove_extra_whitespaces=false")

    @classmethod
    def from_file(cls, path: str) -> "SentencePieceTokenizer":
        try:
            proto = fs.read_bytes(path)
        except FileNotFoundError:
            raise TokenizerFileError(f"SentencePiece model file {path} does not exist") from None
        except OSError as err:
            raise TokenizerFileError(f"SentencePiece model file {path} is unreadable: "
                                     f"{err.strerror or err}") from None
        if not proto:
            raise TokenizerFileError(f"SentencePiece model file {path} is empty")
        return cls(proto, source=path)

    @property
    def vocab_size(self) -> int:
        return int(self._sp.get_piece_size())

    def encode(self, text: str | bytes) -> np.ndarray:
        if isinstance(text, (bytes, bytearray, memoryview)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"SentencePiece encodes UTF-8 text; input is not valid UTF-8 at "
                                 f"byte {err.start}") from None
        return np.asarray(self._sp.encode(text), dtype=np.int64)

    def decode(self, ids) -> bytes:
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        keep = (arr >= 0) & (arr < self.vocab_size)
        keep &= (arr != self.pad_id) & (arr != self.bos_id) & (arr != self.eos_id)
        return self._sp.decode(arr[keep].tolist()).encode("utf-8")

    def token_byte_lengths(self) -> np.ndarray:
        lengths = np.zeros(self.vocab_size, dtype=np.int64)
        for i in range(self.vocab_size):
            if self._sp.is_byte(i):
                lengths[i] = 1
            elif not (self._sp.is_control(i) or self._sp.is_unknown(i)):
                # "▁" is how SentencePiece writes a space (one byte once decoded).
                lengths[i] = len(self._sp.id_to_piece(i).replace("\u2581", " ").encode("utf-8"))
        return lengths

    # The SentencePiece processor is a C++ object: pickle the model proto (Beam ships DoFns and
    # their tokenizer to workers by pickling) and rebuild the processor on arrival.
    def __getstate__(self):
        return {"model_proto": self.model_proto, "source": self.source,
                "model_type": self.model_type}

    def __setstate__(self, state):
        self.__init__(state["model_proto"], state["source"], state["model_type"])

    def pieces(self) -> list[tuple[str, float]]:
        return [(self._sp.id_to_piece(i), float(self._sp.get_score(i)))
                for i in range(self.vocab_size)]

    def describe(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size, **self.special_ids(),
                "unk_id": int(self._sp.unk_id()), "model_type": self.model_type or "unknown",
                "model_sha256": hashlib.sha256(self.model_proto).hexdigest(),
                "byte_fallback": True}

    def _save_files(self, directory: str) -> None:
        _write_atomic(os.path.join(directory, MODEL_FILE), self.model_proto)
        vocab = "".join(f"{piece}\t{score:g}\n" for piece, score in self.pieces())
        _write_atomic(os.path.join(directory, VOCAB_FILE), vocab.encode("utf-8"))

    def in_graph(self):
        return _graph_module()(self.model_proto, self.pad_id, self.bos_id, self.eos_id)


def _write_atomic(path: str, data: bytes) -> None:
    fs.write_bytes(path, data)  # a unique temporary name and a rename (one PUT on S3)


def _graph_module():
    import tensorflow as tf
    import tensorflow_text  # registers the SentencePiece ops in this process

    class SentencePieceGraphTokenizer(tf.Module):
        def __init__(self, model_proto: bytes, pad_id: int, bos_id: int, eos_id: int):
            super().__init__(name="sentencepiece_tokenizer")
            # The model proto becomes an attribute of the SentencepieceOp: embedded in the graph.
            self.sentencepiece = tensorflow_text.SentencepieceTokenizer(
                model=model_proto, out_type=tf.int32, add_bos=False, add_eos=False)
            self._specials = tf.constant([pad_id, bos_id, eos_id], tf.int32)

        def tokenize(self, strings):
            """string[B] -> ragged int32 [B, None] (the Python tokenizer's ids)."""
            return self.sentencepiece.tokenize(strings)

        def detokenize(self, ids):
            """ragged int32 [B, None] -> string[B]; pad, bos, eos and out-of-range ids dropped."""
            vocab = tf.cast(self.sentencepiece.vocab_size(), tf.int32)

            def keep_flat(flat_ids):                                       # int32 [N] -> bool [N]
                special = tf.reduce_any(tf.equal(flat_ids[:, None], self._specials[None]), -1)
                return (flat_ids >= 0) & (flat_ids < vocab) & tf.logical_not(special)

            keep = tf.ragged.map_flat_values(keep_flat, ids)
            return self.sentencepiece.detokenize(tf.ragged.boolean_mask(ids, keep))

    return SentencePieceGraphTokenizer
