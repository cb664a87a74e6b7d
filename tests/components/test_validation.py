"""components/validation without a pipeline: the curated schema resolved for a config, and the
gate's reading of ExampleValidator's SchemaDiff.pb (what it names, that a clean report passes)."""

import os

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2

from schemas import FEATURE
from components.tokenizer.byte_level import VOCAB_SIZE
from components.validation.anomalies import (SCHEMA_DIFF_FILE, AnomaliesFoundError,
                                             check_anomalies, read_anomalies)
from components.validation.schema import resolve_text_lm_schema


def test_schema_is_resolved_for_sequence_length_and_vocabulary():
    """Catches an off-by-one in value_count (examples hold seq_len + 1 ids) or an id range that
    ignores the tokenizer's vocabulary."""
    (feature,) = [f for f in resolve_text_lm_schema(64).feature if f.name == FEATURE]
    assert (feature.value_count.min, feature.value_count.max) == (65, 65)
    assert (feature.int_domain.min, feature.int_domain.max) == (0, VOCAB_SIZE - 1)
    (feature,) = [f for f in resolve_text_lm_schema(8, vocab_size=1000).feature if f.name == FEATURE]
    assert feature.value_count.max == 9 and feature.int_domain.max == 999


def write_report(root, split, report):
    os.makedirs(os.path.join(root, f"Split-{split}"))
    with open(os.path.join(root, f"Split-{split}", SCHEMA_DIFF_FILE), "wb") as fh:
        fh.write(report.SerializeToString())


def test_gate_names_every_anomaly_and_passes_a_clean_report(tmp_path):
    bad = anomalies_pb2.Anomalies()
    info = bad.anomaly_info[FEATURE]
    info.reason.add(type=anomalies_pb2.AnomalyInfo.INT_TYPE_BIG_INT, description="id 300 > 258")
    write_report(tmp_path, "train", anomalies_pb2.Anomalies())
    write_report(tmp_path, "eval", bad)
    check_anomalies(str(tmp_path), ["train"])                       # clean: no error
    (found,) = read_anomalies(str(tmp_path), ["train", "eval"])
    assert (found.split, found.feature, found.kind) == ("eval", FEATURE, "INT_TYPE_BIG_INT")
    with pytest.raises(AnomaliesFoundError, match=r"(?s)1 data anomaly found.*\[eval\] feature 'input_ids'"):
        check_anomalies(str(tmp_path), ["train", "eval"])
