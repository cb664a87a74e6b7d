"""Reading ExampleValidator's anomalies (protobuf only: the lineage CLI imports this without TF)."""


from __future__ import annotations

from components.storage import fs, splits
import os
from dataclasses import dataclass

from tensorflow_metadata.proto.v0 import anomalies_pb2

SCHEMA_DIFF_FILE = "SchemaDiff.pb"


@dataclass(frozen=True)
class Anomaly:
    split: str
    feature: str
    kind: str
    description: str

    def __str__(self) -> str:
        return f"[{self.split}] feature {self.feature!r}: {self.kind}: {self.description}"


class AnomaliesFoundError(RuntimeError):
    """Raised by the gate; its message lists every anomaly (split, feature, kind, description)."""

    def __init__(self, anomalies: list[Anomaly], uri: str):
        self.anomalies = anomalies
        lines = "\n".join(f"  - {a}" for a in anomalies)
        super().__init__(f"validation gate: {len(anomalies)} data anomal"
                         f"{'y' if len(anomalies) == 1 else 'ies'} found, training stopped "
                         f"(ExampleAnomalies at {uri}):\n{lines}")


def read_anomalies(uri: str, split_names: list[str]) -> list[Anomaly]:
    """Every anomaly in an ExampleAnomalies artifact, one entry per (split, feature, reason)."""
    found = []
    for split in split_names:
        path = os.path.join(splits.split_dir(uri, split), SCHEMA_DIFF_FILE)
        report = anomalies_pb2.Anomalies()
        report.ParseFromString(fs.read_bytes(path))
        for feature, info in sorted(report.anomaly_info.items()):
            reasons = info.reason or [None]
            for reason in reasons:
                if reason is None:
                    kind, text = anomalies_pb2.AnomalyInfo.Severity.Name(info.severity), info.description
                else:
                    kind = anomalies_pb2.AnomalyInfo.Type.Name(reason.type)
                    text = reason.description or reason.short_description
                found.append(Anomaly(split, feature, kind, text))
        if report.HasField("dataset_anomaly_info"):
            for reason in report.dataset_anomaly_info.reason:
                found.append(Anomaly(split, "<dataset>", anomalies_pb2.AnomalyInfo.Type.Name(
                    reason.type), reason.description))
    return found


def check_anomalies(uri: str, split_names: list[str]) -> None:
    anomalies = read_anomalies(uri, split_names)
    if anomalies:
        raise AnomaliesFoundError(anomalies, uri)


