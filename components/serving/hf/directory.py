"""Writing a Hugging Face directory for a built GPT, and reading one back (warm start): its
config, tensor shapes from the safetensors header alone (before anything is allocated), the
tensors, the tokenizer files and a content digest. Through components.storage.fs (local, s3://,
gs://). File names: components/serving/hf/__init__.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct

import numpy as np

from components.storage import fs
from components.serving.hf import (CARD_FILE, CONFIG_FILE, GENERATION_FILE, SPM_FILE,
                                   TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE,
                                   HFFormatError, MissingTokenizerFile)
from components.serving.hf import card, mapping, tokenizer_files

DTYPES = {"float32": "F32", "bfloat16": "BF16"}     # --dtype -> safetensors dtype
SAFETENSORS_METADATA = {"format": "pt"}            # what transformers' loader expects


def _cast(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return values
    import ml_dtypes        # TensorFlow's own dependency: round-to-nearest-even bfloat16
    return values.astype(ml_dtypes.bfloat16)


def generation_config(specials: dict) -> dict:
    """generation_config.json: our serving never samples PAD or BOS (decoding.ban), so neither
    does a transformers generate (suppress_tokens)."""
    return {"bos_token_id": int(specials["bos_id"]), "eos_token_id": int(specials["eos_id"]),
            "pad_token_id": int(specials["pad_id"]),
            "suppress_tokens": [int(specials["pad_id"]), int(specials["bos_id"])],
            "do_sample": False}


def write_hf_directory(model, tokenizer, out_dir: str, *, dtype: str = "float32",
                       facts: dict | None = None) -> list[str]:
    """Write the HF layout of a built GPT and its Tokenizer into out_dir; config.json last.
    facts: the model card's lineage facts (components/serving/hf/card.py). Returns the files."""
    from safetensors.numpy import save
    if dtype not in DTYPES:
        raise HFFormatError(f"--dtype {dtype!r}: one of {sorted(DTYPES)}")
    specials = tokenizer.special_ids()
    config = mapping.hf_config(model, specials, dtype)
    fs.makedirs(out_dir)
    tensors = {k: _cast(v, dtype) for k, v in mapping.hf_tensors(model).items()}
    files = {WEIGHTS_FILE: save(tensors, metadata=SAFETENSORS_METADATA),
             GENERATION_FILE: json.dumps(generation_config(specials), indent=2),
             TOKENIZER_FILE: tokenizer_files.tokenizer_json(tokenizer),
             TOKENIZER_CONFIG_FILE: tokenizer_files.tokenizer_config_json(tokenizer, model.context_length),
             CARD_FILE: card.render_card(config, facts or {}),
             CONFIG_FILE: json.dumps(config, indent=2)}
    if tokenizer.kind == "sentencepiece":
        files[SPM_FILE] = tokenizer.model_proto
    for name in sorted(files, key=lambda n: n == CONFIG_FILE):
        data = files[name]
        fs.write_bytes(fs.join(out_dir, name), data if isinstance(data, bytes) else data.encode("utf-8"))
    return sorted(files)


def read_config(hf_dir: str) -> dict:
    path = fs.join(hf_dir, CONFIG_FILE)
    if not fs.exists(path):
        if not fs.exists(hf_dir):
            raise HFFormatError(f"{hf_dir} does not exist (a Hugging Face model directory: "
                                f"{CONFIG_FILE}, {WEIGHTS_FILE}, {TOKENIZER_FILE})")
        raise HFFormatError(f"{path} does not exist: not a Hugging Face model directory")
    try:
        return json.loads(fs.read_text(path))
    except ValueError as err:
        raise HFFormatError(f"{path} is not JSON: {err}") from None


MAX_HEADER_BYTES = 100_000_000


def safetensors_header(hf_dir: str) -> dict:
    """The header of model.safetensors: {name: {"dtype", "shape", "data_offsets"}} plus
    "__metadata__"; read without the data (8-byte length, then JSON)."""
    path = fs.join(hf_dir, WEIGHTS_FILE)
    if not fs.exists(path):
        raise HFFormatError(f"{path} does not exist (sharded checkpoints are not read: save "
                            "with one model.safetensors)")
    with fs.open_file(path, "rb") as fh:
        head = fh.read(8)
        (length,) = struct.unpack("<Q", head) if len(head) == 8 else (None,)
        # The format caps the header at 100 MB (safetensors' own reader refuses more): a length
        # of 2^62 read from random bytes would otherwise be a MemoryError.
        if length is None or length > MAX_HEADER_BYTES:
            raise HFFormatError(f"{path}: not a safetensors file (header length {length})")
        try:
            header = json.loads(fh.read(length))
        except ValueError as err:   # JSON errors and undecodable bytes
            raise HFFormatError(f"{path}: not a safetensors file (its header is not JSON: "
                                f"{err})") from None
    if not isinstance(header, dict):
        raise HFFormatError(f"{path}: not a safetensors file (its header is not a JSON object)")
    return header


def tensor_shapes(hf_dir: str) -> dict[str, tuple]:
    return {k: tuple(v["shape"]) for k, v in safetensors_header(hf_dir).items() if k != "__metadata__"}


def parameter_count(hf_dir: str) -> int:
    return sum(math.prod(shape) for shape in tensor_shapes(hf_dir).values())


def read_tensors(hf_dir: str) -> dict[str, np.ndarray]:
    """Every tensor as float32 (F32, F16 or BF16 on disk)."""
    import ml_dtypes
    from safetensors import deserialize
    kinds = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}
    out = {}
    for name, view in deserialize(fs.read_bytes(fs.join(hf_dir, WEIGHTS_FILE))):
        if view["dtype"] not in kinds:
            raise HFFormatError(f"{hf_dir}/{WEIGHTS_FILE}: tensor {name} is {view['dtype']} "
                                f"(readable: {sorted(kinds)})")
        values = np.frombuffer(bytes(view["data"]), kinds[view["dtype"]]).reshape(view["shape"])
        out[name] = values.astype(np.float32)
    return out


def check_tokenizer_files(hf_dir: str, kind: str) -> None:
    """MissingTokenizerFile naming the first tokenizer file a `kind` tokenizer ("bytes" or
    "sentencepiece": data.tokenizer) needs that the directory lacks."""
    needed = [TOKENIZER_FILE] + ([SPM_FILE] if kind == "sentencepiece" else [])
    for name in needed:
        if not fs.exists(fs.join(hf_dir, name)):
            raise MissingTokenizerFile(f"{hf_dir}: no {name} (a {kind} model needs "
                                       f"{' and '.join(needed)}); the data's tokenizer must be "
                                       "the checkpoint's")


def check_tokenizer(hf_dir: str, tokenizer) -> None:
    """The directory's tokenizer is ours: the files exist (MissingTokenizerFile names the
    missing one) and give our ids (SentencePiece: the same model file; bytes: the same ids on a
    probe text)."""
    check_tokenizer_files(hf_dir, tokenizer.kind)
    if tokenizer.kind == "sentencepiece":
        if fs.read_bytes(fs.join(hf_dir, SPM_FILE)) != tokenizer.model_proto:
            raise HFFormatError(f"{hf_dir}/{SPM_FILE} is not the SentencePiece model the data is "
                                "tokenized with (data.tokenizer / TokenizerGen)")
        return
    from tokenizers import Tokenizer
    probe = "caf\u00e9 \u65e5\u672c \U0001f600 x"
    theirs = Tokenizer.from_str(fs.read_text(fs.join(hf_dir, TOKENIZER_FILE))).encode(probe).ids
    if theirs != tokenizer.encode(probe).tolist():
        raise HFFormatError(f"{hf_dir}/{TOKENIZER_FILE} does not give the byte tokenizer's ids "
                            f"({theirs[:8]}... for {probe!r})")


def directory_digest(hf_dir: str) -> str:
    """sha256 over every file's relative name and bytes (sorted): what lineage records."""
    digest = hashlib.sha256()
    for relative in sorted(fs.walk_files(hf_dir)):
        digest.update(relative.encode() + b"\0")
        with fs.open_file(fs.join(hf_dir, relative), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
