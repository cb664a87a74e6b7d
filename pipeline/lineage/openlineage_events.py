"""OpenLineage run events of a bigtrain run, built from plain records (no MLMD, no TFX, no
transport): a parent run for the pipeline run, a job and a run per stage, START then COMPLETE or
FAIL. `openlineage_stages.py` reads the records from MLMD; `runners/openlineage_emit.py` sends
the events through the client's configured transport (docs/tracking.md, "OpenLineage").

Names follow the OpenLineage naming spec: a local path is namespace `file`, name the absolute
path; `s3://bucket/key` is namespace `s3://bucket`, name `key`; `gs://` likewise. Jobs live in
the namespace `$OPENLINEAGE_NAMESPACE` (default `bigtrain`), named `<pipeline>` (the parent) and
`<pipeline>.<stage>`. Run ids are UUIDs derived from bigtrain's run id (and the stage), so every
process of one run (the local runner, an Airflow task, a Kubeflow step) names the same parent.
"""

from __future__ import annotations

import datetime
import math
import os
import uuid
from dataclasses import dataclass

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (RunFacet, error_message_run, input_statistics_input_dataset,
                                         job_type_job, output_statistics_output_dataset, parent_run,
                                         schema_dataset)
from openlineage.client.naming.dataset import GCS, S3, LocalFileSystem

from schemas import FEATURE, OPENLINEAGE_FACET

# The producer of every event and facet, and the schema of bigtrain's own run facet (the file
# schemas/openlineage/BigtrainRunFacet.json; `.invalid`: the project has no public host yet, so
# the URL names the file, not a place to fetch it from).
PRODUCER = "https://bigtrain.invalid/openlineage"
FACET_SCHEMA_URL = f"https://bigtrain.invalid/schemas/{OPENLINEAGE_FACET}#/$defs/BigtrainRunFacet"
FACET_KEY = "bigtrain"            # the key of the custom facet in a run's facets
DEFAULT_NAMESPACE = "bigtrain"    # jobs' namespace unless $OPENLINEAGE_NAMESPACE says otherwise
_RUN_IDS = uuid.uuid5(uuid.NAMESPACE_URL, PRODUCER)
# MLMD artifact types whose numeric properties are the model's figures (the Trainer's, the
# Evaluator's measurements of it).
FIGURE_TYPES = ("Model", "ModelEvaluation")


@dataclass(frozen=True)
class DatasetRecord:
    """One MLMD artifact a stage read or wrote: its URI, type name and properties (plain values)."""
    uri: str
    type: str
    properties: dict


@dataclass(frozen=True)
class StageRecord:
    """One stage's execution in a run. state: bigtrain's word (complete, cached, failed, ...);
    times in milliseconds since the epoch; error: '<Type>: <message>' of a failed stage."""
    node: str
    state: str
    started_ms: int
    ended_ms: int
    inputs: tuple[DatasetRecord, ...] = ()
    outputs: tuple[DatasetRecord, ...] = ()
    error: str | None = None
    stack_trace: str | None = None


@dataclass(frozen=True)
class RunRecord:
    """The pipeline run: bigtrain's run id, the pipeline's name and the config digest."""
    run_id: str
    pipeline: str
    config_digest: str | None = None
    namespace: str = ""   # "" = $OPENLINEAGE_NAMESPACE or DEFAULT_NAMESPACE

    @property
    def job_namespace(self) -> str:
        return self.namespace or os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_NAMESPACE


@attr.define
class BigtrainRunFacet(RunFacet):
    """bigtrain's run facet (schema: schemas/openlineage/BigtrainRunFacet.json): the config
    digest of the run, the stage's state in bigtrain's words, and the model's figures."""
    configDigest: str | None = attr.field(default=None)  # noqa: N815
    state: str | None = attr.field(default=None)
    figures: dict[str, float] | None = attr.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA_URL


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of a URI by the OpenLineage naming spec: file, s3 and gs."""
    for scheme, naming in (("s3://", S3), ("gs://", GCS)):
        if uri.startswith(scheme):
            bucket, _, key = uri[len(scheme):].partition("/")
            named = naming(bucket_name=bucket, object_key=key.rstrip("/") or "/")
            return named.get_namespace(), named.get_name()
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    named = LocalFileSystem(path=os.path.abspath(path))
    return named.get_namespace(), named.get_name()


def run_uuid(run: RunRecord, node: str | None = None) -> str:
    """The OpenLineage run id of the pipeline run (node None) or of one stage of it."""
    return str(uuid.uuid5(_RUN_IDS, "/".join([run.pipeline, run.run_id] + ([node] if node else []))))


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000.0, datetime.timezone.utc).isoformat()


def row_count(dataset: DatasetRecord) -> int | None:
    """The sequences an Examples artifact holds (train + eval), None if it says nothing."""
    counts = [dataset.properties.get(k) for k in ("sequences_train", "sequences_eval")]
    return sum(counts) if all(isinstance(c, int) for c in counts) else None


def examples_schema(dataset: DatasetRecord) -> schema_dataset.SchemaDatasetFacet:
    """The Examples' one feature: seq_len + 1 int64 token ids per packed sequence."""
    seq_len = dataset.properties.get("seq_len")
    what = f"{seq_len + 1} token ids" if isinstance(seq_len, int) else "token ids"
    return schema_dataset.SchemaDatasetFacet(fields=[schema_dataset.SchemaDatasetFacetFields(
        name=FEATURE, type="INT64", description=f"{what} per packed sequence (tf.train.Example, "
        f"split train and eval)")], producer=PRODUCER)


def _facets(dataset: DatasetRecord) -> dict:
    return {"schema": examples_schema(dataset)} if dataset.type == "Examples" else {}


def input_dataset(dataset: DatasetRecord) -> InputDataset:
    namespace, name = dataset_name(dataset.uri)
    rows = row_count(dataset) if dataset.type == "Examples" else None
    statistics = {} if rows is None else {"inputStatistics": input_statistics_input_dataset.
                                          InputStatisticsInputDatasetFacet(rowCount=rows, producer=PRODUCER)}
    return InputDataset(namespace=namespace, name=name, facets=_facets(dataset), inputFacets=statistics)


def output_dataset(dataset: DatasetRecord, finished: bool) -> OutputDataset:
    """finished: the stage completed, so its row counts are known (COMPLETE, not START)."""
    namespace, name = dataset_name(dataset.uri)
    rows = row_count(dataset) if finished and dataset.type == "Examples" else None
    statistics = {} if rows is None else {"outputStatistics": output_statistics_output_dataset.
                                          OutputStatisticsOutputDatasetFacet(rowCount=rows, producer=PRODUCER)}
    return OutputDataset(namespace=namespace, name=name, facets=_facets(dataset), outputFacets=statistics)


def figures(stage: StageRecord) -> dict[str, float]:
    """The numeric properties of the stage's Model and ModelEvaluation outputs."""
    out = {}
    for dataset in stage.outputs:
        if dataset.type in FIGURE_TYPES:
            out.update({name: value for name, value in dataset.properties.items()
                        if isinstance(value, (int, float)) and not isinstance(value, bool)
                        and math.isfinite(value)})
    return dict(sorted(out.items()))


def _job(run: RunRecord, node: str | None) -> Job:
    kind = "TASK" if node else "DAG"
    return Job(namespace=run.job_namespace, name=f"{run.pipeline}.{node}" if node else run.pipeline,
               facets={"jobType": job_type_job.JobTypeJobFacet(
                   processingType="BATCH", integration="BIGTRAIN", jobType=kind, producer=PRODUCER)})


def _parent(run: RunRecord) -> parent_run.ParentRunFacet:
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=run_uuid(run)),
        job=parent_run.Job(namespace=run.job_namespace, name=run.pipeline),
        root=parent_run.Root(run=parent_run.RootRun(runId=run_uuid(run)),
                             job=parent_run.RootJob(namespace=run.job_namespace, name=run.pipeline)),
        producer=PRODUCER)


def _error(message: str, stack_trace: str | None) -> error_message_run.ErrorMessageRunFacet:
    return error_message_run.ErrorMessageRunFacet(message=message, programmingLanguage="PYTHON",
                                                  stackTrace=stack_trace, producer=PRODUCER)


def stage_events(run: RunRecord, stage: StageRecord) -> list[RunEvent]:
    """START and COMPLETE (complete or cached) or FAIL (any other end) of one stage; a stage
    still running gets START only."""
    start_facets = {"parent": _parent(run), FACET_KEY: BigtrainRunFacet(
        configDigest=run.config_digest, state="running", producer=PRODUCER)}
    events = [RunEvent(eventType=RunState.START, eventTime=_time(stage.started_ms), producer=PRODUCER,
                       run=Run(runId=run_uuid(run, stage.node), facets=start_facets),
                       job=_job(run, stage.node), inputs=[input_dataset(d) for d in stage.inputs],
                       outputs=[output_dataset(d, False) for d in stage.outputs])]
    if stage.state in ("running", "new"):
        return events
    finished = stage.state in ("complete", "cached")
    end_facets = {"parent": _parent(run), FACET_KEY: BigtrainRunFacet(
        configDigest=run.config_digest, state=stage.state, figures=figures(stage), producer=PRODUCER)}
    if not finished:
        end_facets["errorMessage"] = _error(stage.error or f"stage {stage.node} {stage.state}",
                                            stage.stack_trace)
    events.append(RunEvent(
        eventType=RunState.COMPLETE if finished else RunState.FAIL, eventTime=_time(stage.ended_ms),
        producer=PRODUCER, run=Run(runId=run_uuid(run, stage.node), facets=end_facets),
        job=_job(run, stage.node), inputs=[input_dataset(d) for d in stage.inputs],
        outputs=[output_dataset(d, finished) for d in stage.outputs]))
    return events


def pipeline_event(run: RunRecord, state: RunState, time_ms: int, error: str | None = None
                   ) -> RunEvent:
    """The parent run's START, COMPLETE or FAIL (error: what stopped it)."""
    facets: dict = {FACET_KEY: BigtrainRunFacet(configDigest=run.config_digest,
                                               state=state.value.lower(), producer=PRODUCER)}
    if state == RunState.FAIL:
        facets["errorMessage"] = _error(error or "the run failed", None)
    return RunEvent(eventType=state, eventTime=_time(time_ms), producer=PRODUCER,
                    run=Run(runId=run_uuid(run), facets=facets), job=_job(run, None))
