"""Curated TFDV schemas (`*.pbtxt`, shipped as package data) and the feature names they declare.

The bottom of bigtrain's layers: every stage that reads or writes packed sequences names the
feature from here."""

import os

SCHEMA_DIR = os.path.dirname(os.path.abspath(__file__))
TEXT_LM = "text_lm.pbtxt"
# The one tf.train.Example feature of a packed sequence: seq_len + 1 int64 ids.
FEATURE = "input_ids"
# The JSON schema of bigtrain's OpenLineage run facet (pipeline/lineage/openlineage_events.py),
# relative to SCHEMA_DIR.
OPENLINEAGE_FACET = "openlineage/BigtrainRunFacet.json"
