"""The curated Schema artifact's MLMD property names, the one place that spells them
(components/validation/schema_gen.py writes them; the run report reads them)."""

from __future__ import annotations

CURATED_SCHEMA = "curated_schema"   # the schema's name (schemas/)
SEQ_LEN = "seq_len"                 # the sequence length it was resolved for

PROPERTIES = frozenset((CURATED_SCHEMA, SEQ_LEN))
