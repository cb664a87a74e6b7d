"""The model an HF export starts from: a Model artifact (what the Trainer wrote, what the Pusher
pushes) rebuilt as a float32 Keras GPT from its named weights (Format-Weights), its settings from
the serving SavedModel's MODEL_INFO and its tokenizer from the same SavedModel (a SentencePiece
model is embedded in the graph: read back from saved_model.pb, so the tokenizer exported is the
one that was served and evaluated).
"""

from __future__ import annotations

import json
import os

from components.storage import fs
from components.serving.export import BYTE_TOKENIZER_INFO, MODEL_INFO
from components.serving.hf import HFFormatError
from components.serving.variants import DIRS

SENTENCEPIECE_OP = "SentencepieceOp"


def model_dir_of(path: str) -> str:
    """A Model artifact folder from itself or its serving SavedModel (Format-Serving)."""
    from components.model.weights import WEIGHTS_PREFIX
    path = path.rstrip("/")
    for candidate in (path, os.path.dirname(path)):
        if fs.exists(fs.join(candidate, WEIGHTS_PREFIX + ".index")):
            return candidate
    raise HFFormatError(f"{path}: not a Model artifact or its {DIRS['float']} (no "
                        f"{WEIGHTS_PREFIX}.index beside it); give a run id, a pushed version or "
                        "the model folder of a bigtrain run")


def model_info(model_dir: str) -> dict:
    path = fs.join(model_dir, DIRS["float"], MODEL_INFO)
    try:
        return json.loads(fs.read_text(path))
    except (OSError, ValueError) as err:
        raise HFFormatError(f"{path}: unreadable model info ({err})") from None


def embedded_sentencepiece(saved_model_dir: str) -> bytes:
    """The SentencePiece model proto a SavedModel's graph carries (the op's `model` attribute)."""
    from tensorflow.python.saved_model import loader_impl   # reads the graph proto only
    proto = loader_impl.parse_saved_model(saved_model_dir)
    for graph in proto.meta_graphs:
        nodes = list(graph.graph_def.node)
        for function in graph.graph_def.library.function:
            nodes += list(function.node_def)
        for node in nodes:
            if node.op == SENTENCEPIECE_OP and node.attr["model"].s:
                return node.attr["model"].s
    raise HFFormatError(f"{saved_model_dir}: no SentencePiece model in the graph")


def exported_tokenizer(model_dir: str, info: dict):
    from components.tokenizer.byte_level import ByteTokenizer
    from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
    described = info.get("tokenizer")
    if described == BYTE_TOKENIZER_INFO or (isinstance(described, dict) and described.get("kind") == "bytes"):
        return ByteTokenizer()
    serving = fs.join(model_dir, DIRS["float"])
    return SentencePieceTokenizer(embedded_sentencepiece(serving), source=serving,
                                  model_type=(described or {}).get("model_type"))


def load_exported(path: str):
    """(float32 GPT with the trained weights, its Tokenizer, MODEL_INFO) of a Model artifact."""
    from components import config as config_lib
    from components.model.gpt import build_model
    from components.model.weights import WEIGHTS_PREFIX, assign_weights
    model_dir = model_dir_of(path)
    info = model_info(model_dir)
    model_config = config_lib.from_dict(config_lib.ModelConfig, info["config"]["model"])
    model = build_model(model_config, int(info["context_length"]), "float32",
                        vocab_size=int(info["vocab_size"]))
    assign_weights(model, fs.join(model_dir, WEIGHTS_PREFIX))
    return model, exported_tokenizer(model_dir, info), info
