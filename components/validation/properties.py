"""The validation stages' MLMD property names, the one place that spells them: the curated
Schema's (components/validation/schema_gen.py writes them; the run report reads them) and the
one bigtrain reads of TFX's ExampleValidator output (`bigtrain lineage` reads it)."""

from __future__ import annotations

CURATED_SCHEMA = "curated_schema"   # the schema's name (schemas/)
SEQ_LEN = "seq_len"                 # the sequence length it was resolved for

ANOMALIES_BLESSED = "blessed"       # ExampleAnomalies: 1 when no anomaly was found (TFX)

PROPERTIES = frozenset((CURATED_SCHEMA, SEQ_LEN, ANOMALIES_BLESSED))
