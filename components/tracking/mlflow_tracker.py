"""The MLflow tracker: a tracking server (http://host:port) or a local store (sqlite:///path),
through mlflow's MlflowClient (mlflow-skinny). The tracker run of a bigtrain run is the one of
the experiment tagged bigtrain.run_id=<run id>: created by the first phase, resumed by the next.
Held to one HTTP try of MLFLOW_HTTP_REQUEST_TIMEOUT (default here 5) s: an unreachable server
fails in seconds, not after mlflow's default minutes of retries. Copied outputs
(tracking.copy_artifacts) go where the experiment keeps its artifacts: the server's artifact
store, or beside a sqlite store (artifact_root)."""

from __future__ import annotations

import os
import pathlib
import time

from components.storage import fs
from components.config.tracking import MLFLOW_ARTIFACTS
from components.tracking import PIPELINE_TAG, RUN_TAG, flat_params

# mlflow's own environment variables, set here unless the environment already sets them.
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "5", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
BATCH = 100           # MlflowClient.log_batch: at most 100 params (and 1000 metrics) a call
MAX_PARAM = 6000      # an MLflow param value's length limit


class MlflowTracker:
    name = "mlflow"

    def __init__(self, settings: dict, identity: dict):
        self.where, self.experiment = settings["mlflow_uri"], settings["mlflow_experiment"]
        self.identity, self.run_id, self.client = identity, "", None

    def start(self, params: dict | None, tags: dict) -> str:
        for key, value in HTTP_LIMITS.items():
            os.environ.setdefault(key, value)
        from mlflow.tracking import MlflowClient
        self.client = MlflowClient(tracking_uri=self.where)
        experiment = self.client.get_experiment_by_name(self.experiment)
        experiment_id = (experiment.experiment_id if experiment is not None else
                         self.client.create_experiment(self.experiment,
                                                       artifact_location=artifact_root(self.where)))
        bigtrain_run = self.identity["run_id"]
        found = self.client.search_runs(
            [experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{bigtrain_run}'", max_results=1)
        if found:
            self.run_id = found[0].info.run_id
        else:
            run = self.client.create_run(experiment_id, run_name=bigtrain_run, tags={
                RUN_TAG: bigtrain_run, PIPELINE_TAG: self.identity.get("pipeline_name", "")})
            self.run_id = run.info.run_id
        self._tags(tags)
        if params and not found:   # a resumed run has them (MLflow refuses a changed param)
            self._params(flat_params(params))
        return self.run_id

    def _tags(self, tags: dict) -> None:
        from mlflow.entities import RunTag
        if tags:
            self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def _params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param
        items = [Param(k, v[:MAX_PARAM]) for k, v in sorted(params.items())]
        for i in range(0, len(items), BATCH):
            self.client.log_batch(self.run_id, params=items[i:i + BATCH])

    def log_step(self, step: int, figures: dict) -> None:
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[
            Metric(k, float(v), now, step) for k, v in figures.items()])

    def log_final(self, figures: dict, tags: dict) -> None:
        """The final figures as metrics at step 0 (their own names: final.*), tags as tags."""
        self.log_step(0, figures)
        self._tags(tags)

    def copy_folder(self, name: str, folder: str) -> None:
        """Every file under the local `folder`, into the run's artifacts under `name`/."""
        self.client.log_artifacts(self.run_id, folder, artifact_path=name)

    def finish(self, status: str | None) -> None:
        if status and self.client is not None:
            self.client.set_terminated(self.run_id, status)


def artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its copied files: beside a sqlite store, its
    MLFLOW_ARTIFACTS folder (MLflow's own default is ./mlruns under the working directory, which
    would put them outside the home); a server or any other store decides for itself (None)."""
    if not uri.startswith("sqlite:///"):
        return None
    database = uri[len("sqlite:///"):]
    return pathlib.Path(os.path.dirname(fs.absolute(database)), MLFLOW_ARTIFACTS).as_uri()
