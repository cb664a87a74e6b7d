"""What the model, training, export and evaluation need to know about the tokenizer, decided by
the config alone (so it is known when the pipeline is built, before TokenizerGen runs):
vocabulary size and special ids. The Tokenizer artifact is checked against it where it is used
(run_fn, TextExampleGen), so a mismatch is an error, never a silently wrong model."""

from __future__ import annotations

from typing import NamedTuple

from components.tokenizer import byte_level


class TokenSpec(NamedTuple):
    vocab_size: int
    pad_id: int
    bos_id: int
    eos_id: int


BYTES = TokenSpec(byte_level.VOCAB_SIZE, byte_level.PAD_ID, byte_level.BOS_ID, byte_level.EOS_ID)
# The special ids training.train_sentencepiece gives every model (unk is 1).
SENTENCEPIECE_PAD_ID, SENTENCEPIECE_BOS_ID, SENTENCEPIECE_EOS_ID = 0, 2, 3


def token_spec(data) -> TokenSpec:
    """The TokenSpec of a DataConfig (data.tokenizer, data.vocab_size)."""
    if getattr(data, "tokenizer", "bytes") == "sentencepiece":
        return TokenSpec(int(data.vocab_size), SENTENCEPIECE_PAD_ID, SENTENCEPIECE_BOS_ID,
                         SENTENCEPIECE_EOS_ID)
    return BYTES


def of_tokenizer(tokenizer) -> TokenSpec:
    return TokenSpec(tokenizer.vocab_size, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)


def check(tokenizer, expected: TokenSpec, where: str) -> None:
    actual = of_tokenizer(tokenizer)
    if actual != expected:
        raise ValueError(f"{where}: the tokenizer has {actual} but the config expects {expected} "
                         "(data.tokenizer / data.vocab_size)")
