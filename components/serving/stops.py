"""Stop strings in the decoding loop: what each id adds to the text, and whether a stop string
ends inside the piece just appended.

`stop` is one string per row: the row's stop strings joined by STOP_SEPARATOR (U+001F), "" =
none. One string per row because TF Serving's batcher pads a variable dimension with the
request's first element (a [B, S] input gave rows extra stop strings) and cannot merge an empty
[B, 0] with S >= 1.
"""

from __future__ import annotations

import re

import tensorflow as tf

from components.serving.inputs import checked, per_row

STOP_SEPARATOR = "\x1f"   # ASCII unit separator: joins a row's stop strings in `stop`


def piece_bytes(tokenizer) -> list[bytes]:
    """What each id adds to the text, as bytes. Byte tokenizer: ids 0-255 their byte, the
    specials nothing. SentencePiece: byte pieces (<0xE9>) their byte, "▁" a space, control and
    unknown ids nothing."""
    if tokenizer.kind == "bytes":
        return [bytes([i]) for i in range(256)] + [b""] * (tokenizer.vocab_size - 256)
    lengths = tokenizer.token_byte_lengths()
    out = []
    for i, (piece, _) in enumerate(tokenizer.pieces()):
        byte = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
        out.append(bytes([int(byte.group(1), 16)]) if byte else
                   piece.replace("\u2581", " ").encode("utf-8") if lengths[i] else b"")
    return out


def stop_strings(stop, batch):
    """string[B] (a row's stop strings joined by STOP_SEPARATOR; "" = none) -> string[B, S],
    padded with "" (padding never matches: `stopped` skips empty strings). An empty stop string
    inside a non-empty row (a leading, trailing or doubled separator) is InvalidArgument."""
    stop = per_row(stop, batch, "stop")
    split = tf.strings.split(stop, sep=STOP_SEPARATOR)                  # ragged (B, None)
    empty = tf.equal(tf.strings.length(split.flat_values), 0)
    in_used_row = tf.gather(tf.strings.length(stop) > 0, split.value_rowids())
    dense = tf.reshape(split.to_tensor(default_value=""), [batch, -1])   # static B where known
    return checked(dense, tf.logical_not(empty & in_used_row), "stop strings must not be empty")


def stopped(text, piece_length, stop, longest_piece: int):
    """Does a stop string end inside the piece just appended? text string[B] (the generated
    bytes so far), piece_length int32[B], stop string[B, S] ("" = padding), longest_piece the
    most bytes one id adds -> bool[B]."""
    stop_length = tf.strings.length(stop)                               # (B, S)
    text_length = tf.strings.length(text)[:, None]
    texts = tf.broadcast_to(text[:, None], tf.shape(stop))
    hit = tf.zeros(tf.shape(stop), tf.bool)
    for back in range(longest_piece):                                   # end = text end - back
        start = text_length - back - stop_length
        found = tf.equal(tf.strings.substr(texts, tf.maximum(start, 0), stop_length), stop)
        hit |= found & (start >= 0) & (back < piece_length[:, None])
    return tf.reduce_any(hit & (stop_length > 0), axis=-1)
