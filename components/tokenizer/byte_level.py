"""The byte tokenizer: UTF-8 bytes are ids 0..255, then PAD 256, BOS 257, EOS 258.

No model file, no unknown ids, every byte string round-trips. The constants below are the byte
vocabulary's, used as defaults where no Tokenizer artifact exists (byte runs). In the graph it is two TensorFlow ops
each way, so serving needs nothing beyond stock TensorFlow.
"""

from __future__ import annotations

import numpy as np

from components.tokenizer.base import Tokenizer

PAD_ID = 256  # fills the tail of the last sequence of a bucket; never a training target
BOS_ID = 257  # starts every document
EOS_ID = 258  # ends every document
VOCAB_SIZE = 259


def encode_bytes(data: bytes) -> np.ndarray:
    """The one byte encoder: bytes -> uint8 ids, a view without a copy (the data stage packs
    gigabytes through it; the packer widens to int32 when it concatenates)."""
    return np.frombuffer(data, dtype=np.uint8)


class ByteTokenizer(Tokenizer):
    kind = "bytes"
    pad_id, bos_id, eos_id = PAD_ID, BOS_ID, EOS_ID

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def encode(self, text: str | bytes) -> np.ndarray:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return encode_bytes(data).astype(np.int64)

    def decode(self, ids) -> bytes:
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        return arr[(arr >= 0) & (arr < 256)].astype(np.uint8).tobytes()

    def token_byte_lengths(self) -> np.ndarray:
        return np.array([1] * 256 + [0] * 3, dtype=np.int64)

    def describe(self) -> dict:
        return {"kind": self.kind, "vocab_size": VOCAB_SIZE, **self.special_ids(),
                "description": "UTF-8 bytes 0-255, pad 256, bos 257, eos 258"}

    def in_graph(self):
        return _graph_module()()


def _graph_module():
    import tensorflow as tf

    class ByteGraphTokenizer(tf.Module):
        def __init__(self):
            super().__init__(name="byte_tokenizer")

        def tokenize(self, strings):
            """string[B] -> ragged int32 [B, None], one id per byte."""
            chars = tf.strings.bytes_split(strings)                   # ragged string [B, None]
            byte_ids = tf.reshape(tf.io.decode_raw(chars.flat_values, tf.uint8), [-1])
            return chars.with_flat_values(tf.cast(byte_ids, tf.int32))

        def detokenize(self, ids):
            """ragged int32 [B, None] -> string[B]; ids outside 0..255 (specials) dropped."""
            ids = tf.ragged.boolean_mask(ids, (ids >= 0) & (ids < 256))
            table = tf.constant([bytes([i]) for i in range(256)])
            return tf.strings.reduce_join(tf.gather(table, ids), axis=-1)

    return ByteGraphTokenizer

