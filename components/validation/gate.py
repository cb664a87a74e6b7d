"""The anomalies gate: stops the run before training when ExampleValidator found anomalies."""

from tfx.dsl.component.experimental.annotations import InputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts

from components.validation.anomalies import check_anomalies


@component
def AnomaliesGate(anomalies: InputArtifact[standard_artifacts.ExampleAnomalies]) -> None:
    """Fails (and so stops every downstream stage) when the anomalies artifact is not empty."""
    check_anomalies(anomalies.uri, artifact_utils.decode_split_names(anomalies.split_names))
