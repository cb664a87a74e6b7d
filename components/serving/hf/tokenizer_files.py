"""The tokenizer files of a Hugging Face directory, built with the `tokenizers` library so that its
ids equal ours (tests/export/test_hf_tokenizer.py checks them on a multilingual corpus).

Bytes (ids 0-255 = the byte, 256 PAD, 257 BOS, 258 EOS): a BPE model without merges over GPT-2's
byte-to-character alphabet (the ByteLevel pre-tokenizer turns every byte into one character and
the vocabulary maps that character to the byte's value), no regex split, no prefix space; the
three specials are added tokens 256, 257, 258.

SentencePiece (unigram or BPE, identity normalization, no dummy prefix, byte fallback: what
components/tokenizer/training.py trains): the same pieces and scores as a `tokenizers` Unigram,
or a BPE whose merges are read off the vocabulary (the pairs whose concatenation is a piece,
ranked by that piece's score, as transformers' SentencePiece converter does); spaces become
U+2581 in a normalizer and back in the decoder; byte fallback on both sides; no pre-tokenizer
(SentencePiece encodes the whole text, and its pieces may hold runs of spaces). tokenizer.model
is copied as it is, for loaders that read SentencePiece directly (llama.cpp's converter).

Invalid UTF-8: `tokenizers` encodes str only, so invalid UTF-8 input cannot reach it (ours
encodes bytes); ids that spell invalid UTF-8 decode there with U+FFFD for each bad sequence,
the same text our serving signatures return as `text` (`text_bytes` keeps the raw bytes).
Literal special-token text ("<s>") in the input is the special id in HF (every HF tokenizer
does this), a sequence of characters in ours.
"""

from __future__ import annotations

import json

BYTE_SPECIALS = ("<pad>", "<s>", "</s>")     # ids 256, 257, 258
SPACE = "\u2581"


def byte_alphabet() -> list[str]:
    """GPT-2's byte -> printable character table (index = byte), the ByteLevel pre-tokenizer's."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def byte_tokenizer():
    """A `tokenizers.Tokenizer` with our byte ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    vocab = {char: byte for byte, char in enumerate(byte_alphabet())}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in BYTE_SPECIALS])
    return tokenizer


def _bpe_merges(pieces: list[tuple[str, float]]) -> list[tuple[str, str]]:
    """Merges for a SentencePiece BPE vocabulary: every split of a piece into two pieces,
    ranked by the merged piece's score (higher first), then by the parts' ids."""
    ids = {piece: i for i, (piece, _) in enumerate(pieces)}
    found = []
    for piece, score in pieces:
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                found.append((-score, ids[left], ids[right], left, right))
    return [(left, right) for *_, left, right in sorted(found)]


SPM_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}   # TrainerSpec.ModelType


def _fields(message: bytes):
    """(field number, wire type, value) of a protobuf message: varints as int, length-delimited
    as bytes (what this module reads of a SentencePiece ModelProto; the `sentencepiece`
    package's generated _pb2 does not load under the protobuf runtime TensorFlow pins)."""
    def varint(at):
        value, shift = 0, 0
        while True:
            byte = message[at]
            value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
            if byte < 0x80:
                return value, at
    at = 0
    while at < len(message):
        key, at = varint(at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(at)
        elif wire == 2:
            length, at = varint(at)
            value, at = message[at:at + length], at + length
        else:                                   # fixed64 / fixed32 (scores, ids): skipped
            value, at = None, at + (8 if wire == 1 else 4)
        yield number, wire, value


def model_type(model_proto: bytes) -> str:
    """The SentencePiece model's type (ModelProto.trainer_spec.model_type), from the file
    itself: a Tokenizer loaded without it says "unknown"."""
    for number, wire, value in _fields(model_proto):
        if number == 2 and wire == 2:           # trainer_spec
            for inner, inner_wire, kind in _fields(value):
                if inner == 3 and inner_wire == 0:
                    return SPM_MODEL_TYPES.get(kind, "unknown")
            return "unigram"                    # the field's default
    return "unigram"


def sentencepiece_tokenizer(sp):
    """A `tokenizers.Tokenizer` equal to our SentencePieceTokenizer `sp` (ids and decoding)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    pieces = sp.pieces()
    unk = sp._sp.unk_id()
    kind = model_type(sp.model_proto)
    if kind not in ("bpe", "unigram"):
        from components.serving.hf import HFFormatError
        raise HFFormatError(f"{sp.source}: a SentencePiece {kind} model; tokenizer.json is "
                            "written for unigram and BPE models")
    if kind == "bpe":
        vocab = {piece: i for i, (piece, _) in enumerate(pieces)}
        model = models.BPE(vocab=vocab, merges=_bpe_merges(pieces), unk_token=pieces[unk][0],
                           byte_fallback=True, fuse_unk=True)
    else:
        model = models.Unigram(pieces, unk_id=unk, byte_fallback=True)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.Replace(" ", SPACE)
    tokenizer.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    controls = [pieces[i][0] for i in range(len(pieces))
                if sp._sp.is_control(i) or sp._sp.is_unknown(i)]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in controls])
    return tokenizer


def tokenizer_json(tokenizer) -> str:
    """tokenizer.json for our Tokenizer (bytes or SentencePiece)."""
    built = byte_tokenizer() if tokenizer.kind == "bytes" else sentencepiece_tokenizer(tokenizer)
    return built.to_str(pretty=True)


def special_names(tokenizer) -> dict[str, str]:
    """pad/bos/eos token text by role."""
    if tokenizer.kind == "bytes":
        return dict(zip(("pad_token", "bos_token", "eos_token"), BYTE_SPECIALS))
    return {f"{role}_token": tokenizer._sp.id_to_piece(getattr(tokenizer, f"{role}_id"))
            for role in ("pad", "bos", "eos")}


def tokenizer_config_json(tokenizer, context_length: int) -> str:
    """tokenizer_config.json: transformers' PreTrainedTokenizerFast over tokenizer.json; no
    BOS/EOS added by encode (the caller adds BOS, as our serving does)."""
    return json.dumps(dict(special_names(tokenizer), tokenizer_class="PreTrainedTokenizerFast",
                           model_max_length=context_length, add_bos_token=False,
                           add_eos_token=False, clean_up_tokenization_spaces=False), indent=2)
