"""The curated schema in schemas/, resolved for one config (sequence length, vocabulary)."""

from __future__ import annotations

import os

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from schemas import FEATURE, SCHEMA_DIR, TEXT_LM
from components.tokenizer.byte_level import VOCAB_SIZE


def load_schema(name: str = TEXT_LM) -> schema_pb2.Schema:
    with open(os.path.join(SCHEMA_DIR, name), encoding="utf-8") as fh:
        return text_format.Parse(fh.read(), schema_pb2.Schema())


def resolve_text_lm_schema(seq_len: int, vocab_size: int | None = None) -> schema_pb2.Schema:
    """The curated text_lm schema with value_count = seq_len + 1 and the tokenizer's id range."""
    schema = load_schema(TEXT_LM)
    (feature,) = [f for f in schema.feature if f.name == FEATURE]
    feature.value_count.min = feature.value_count.max = seq_len + 1
    feature.int_domain.min = 0
    feature.int_domain.max = (vocab_size or VOCAB_SIZE) - 1
    return schema
