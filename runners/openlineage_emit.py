"""Sending OpenLineage events (pipeline/lineage/openlineage_events.py) through the transport the
OpenLineage client configures itself: `openlineage.yml` (in $OPENLINEAGE_CONFIG, the working
folder or ~/.openlineage), `OPENLINEAGE__TRANSPORT__*` variables or `OPENLINEAGE_URL`. Nothing
configured (or OPENLINEAGE_DISABLED=true): nothing is sent, no client is made, nothing is printed.

Who sends: the local runner (the parent run's START before the pipeline, then every stage's START
and COMPLETE / FAIL from MLMD and the parent's end, after it), an Airflow task (callbacks on every
task of the DAG, runners/orchestrators/airflow.py) and a Kubeflow step (runners/orchestrators/kfp_entrypoint.py, from its
ExecutorInput). A transport that fails (an endpoint down) never fails the run: one warning
(`OpenLineageNotSent`) and the run's remaining events are dropped, so a dead endpoint costs one
event's timeout and retries (the HTTP transport's `timeout` and `retry` settings), not one per
event."""

from __future__ import annotations

import logging
import os
import time

from pipeline.lineage import openlineage_events as ol

LOG = logging.getLogger("bigtrain.openlineage")


class OpenLineageNotSent(UserWarning):
    """The name of the warning when the configured transport refused an event."""


def configured() -> bool:
    """Whether the OpenLineage client has a transport configured (its own lookup order)."""
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OPENLINEAGE_URL") or any(k.startswith("OPENLINEAGE__TRANSPORT") for k in os.environ):
        return True
    from openlineage.client import OpenLineageClient
    return OpenLineageClient._find_yaml_config_path() is not None


def new_client():
    """An OpenLineageClient from the client's own configuration, leaving os.environ as it was.
    The client copies OPENLINEAGE_URL into OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP__* of
    the process environment and never removes them (and skips the copy once they exist): in a
    long-lived process (a notebook, an Airflow worker, the test suite) every later run would
    still send to the first URL, even with OPENLINEAGE_URL changed or unset. It reads its
    configuration while it is made, so the environment is restored right after."""
    from openlineage.client import OpenLineageClient
    before = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE__")}
    try:
        return OpenLineageClient()
    finally:
        for key in [k for k in os.environ if k.startswith("OPENLINEAGE__") and k not in before]:
            del os.environ[key]
        os.environ.update(before)


class Emitter:
    """One run's sender: the client made once when configured; after the first failure it sends
    nothing more (one warning names the event, the transport and the error)."""

    def __init__(self, client=None):
        self.client = client
        if client is None and configured():
            self.client = new_client()
        self.failed = False
        self.sent = 0

    def emit(self, events) -> None:
        for event in events:
            if self.client is None or self.failed:
                return
            try:
                self.client.emit(event)
                self.sent += 1
            except Exception as err:  # noqa: BLE001 - lineage must never fail the run
                self.failed = True
                LOG.warning("%s: the %s event of job %s was not sent through the %s transport "
                            "(%s: %s); this run sends no more OpenLineage events (the run goes on)",
                            OpenLineageNotSent.__name__, event.eventType.value, event.job.name,
                            getattr(self.client.transport, "kind", "?"), type(err).__name__, err)

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close(timeout=5.0)
            except Exception:  # noqa: BLE001
                pass


def now_ms() -> int:
    return int(time.time() * 1000)


def emit_local_run(emitter: Emitter, store, run: ol.RunRecord, error: str | None) -> None:
    """After a local run: every stage's events from MLMD, then the parent's COMPLETE or FAIL
    (error: what stopped the run). A run that never reached MLMD sends the parent's end only."""
    from pipeline.lineage.openlineage_stages import run_record, stage_records
    from pipeline.lineage.store import Lineage
    if emitter.client is None:
        return
    if store is not None:
        lin = Lineage(store, live_writer=True)
        context = store.get_context_by_type_and_name("pipeline_run", run.run_id)
        if context is not None:
            run = run_record(lin, context, run.pipeline)
            for stage in stage_records(lin, context):
                emitter.emit(ol.stage_events(run, stage))
    emitter.emit([ol.pipeline_event(run, ol.RunState.FAIL if error else ol.RunState.COMPLETE,
                                    now_ms(), error)])
    emitter.close()


def emit_stage_from_store(emitter: Emitter, store, run_id: str, pipeline: str, node: str,
                          error: str | None = None, mlmd_run: str | None = None) -> None:
    """One stage's COMPLETE or FAIL (its START is sent when it starts), read from MLMD (the run
    context named mlmd_run, default run_id); a run or stage MLMD does not know gets the end event
    without datasets."""
    from components.common.errors import NotFoundError
    from pipeline.lineage.openlineage_stages import stage_records
    from pipeline.lineage.store import Lineage
    run, stage = ol.RunRecord(run_id, pipeline), None
    try:
        lin = Lineage(store)
        found = stage_records(lin, lin.run(mlmd_run or run_id), node) if store is not None else []
        stage = found[-1] if found else None
    except NotFoundError:
        pass
    if stage is None:
        stage = ol.StageRecord(node, "failed" if error else "complete", now_ms(), now_ms())
    if error and stage.error is None:
        stage = ol.StageRecord(stage.node, "failed", stage.started_ms, stage.ended_ms,
                               stage.inputs, stage.outputs, error)
    emitter.emit(ol.stage_events(run, stage)[1:])
    emitter.close()


def stage_start(run_id: str, pipeline: str, node: str, inputs=(), outputs=()) -> list:
    """A stage's START event, sent as it starts (Airflow, Kubeflow)."""
    stage = ol.StageRecord(node, "running", now_ms(), now_ms(), tuple(inputs), tuple(outputs))
    return ol.stage_events(ol.RunRecord(run_id, pipeline), stage)


# -- Airflow: callbacks on every task of the DAG (runners/orchestrators/airflow.py) ------------------------------
def airflow_callbacks(pipeline: str, metadata_path: str) -> dict:
    """default_args of the DAG: each task sends its START as it starts and its COMPLETE or FAIL
    (datasets read from the DAG's MLMD store) as it ends; the run id is Airflow's."""
    import functools
    return {"on_execute_callback": functools.partial(airflow_started, pipeline),
            "on_success_callback": functools.partial(airflow_ended, pipeline, metadata_path),
            "on_failure_callback": functools.partial(airflow_ended, pipeline, metadata_path)}


def airflow_started(pipeline: str, context: dict) -> None:
    emitter = Emitter()
    emitter.emit(stage_start(context["dag_run"].run_id, pipeline, context["task"].task_id))
    emitter.close()


def airflow_ended(pipeline: str, metadata_path: str, context: dict) -> None:
    emitter = Emitter()
    if emitter.client is None:
        return
    from pipeline.lineage.connection import connection_config, open_store
    error = context.get("exception")
    try:
        store = open_store(connection_config(metadata_path, read_only=True))
    except Exception as err:  # noqa: BLE001 - the end event goes out without datasets
        LOG.warning("OpenLineage: no datasets for task %s (%s)", context["task"].task_id, err)
        store = None
    run_id = context["dag_run"].run_id
    # TFX's Airflow runner names the run's context <pipeline>.<Airflow run id>
    # (tfx.orchestration.data_types.PipelineInfo.pipeline_run_context_name); the events keep
    # Airflow's run id, as Airflow's own OpenLineage provider does.
    emit_stage_from_store(emitter, store, run_id, pipeline, context["task"].task_id,
                          None if error is None else f"{type(error).__name__}: {error}",
                          mlmd_run=f"{pipeline}.{run_id}")


# -- Kubeflow: a step's ExecutorInput (runners/orchestrators/kfp_entrypoint.py) ----------------------------------
def kfp_task(executor_input: dict, task: str | None = None) -> tuple[str, str, str]:
    """(pipeline, run id, task) of a step, from an artifact URI, which the KFP launcher lays out
    as <pipeline root>/<pipeline>/<run id>/<task>/<execution>/<output> (runners/orchestrators/kfp_local.py does
    the same): its first output's, else (a step without outputs) its first input's, whose task
    is the producer's, so `task` (the spec's {{$.pipeline_task_name}}) names the step when given."""
    for side in ("outputs", "inputs"):
        for entry in executor_input.get(side, {}).get("artifacts", {}).values():
            for artifact in entry.get("artifacts", []):
                parts = artifact["uri"].rstrip("/").split("/")
                if len(parts) >= 5:
                    return parts[-5], parts[-4], task or (parts[-3] if side == "outputs" else "unknown")
    return "bigtrain", "unknown", task or "unknown"


def _kfp_datasets(keyed: dict) -> tuple:
    """ExecutorInput artifacts as DatasetRecords: the type from the schema title (tfx.Examples),
    the properties from the metadata."""
    return tuple(ol.DatasetRecord(a["uri"], a.get("type", {}).get("schemaTitle", "").split(".")[-1],
                                  dict(a.get("metadata") or {}))
                 for name in sorted(keyed) for a in (keyed[name].get("artifacts", [])
                                                      if isinstance(keyed[name], dict) else keyed[name]))


def kfp_events(executor_input: dict, state: str, started_ms: int, error: str | None = None,
               outputs: dict | None = None, task: str | None = None) -> list:
    """A step's START (state 'running') or its end (outputs: what its ExecutorOutput wrote)."""
    pipeline, run_id, task = kfp_task(executor_input, task)
    stage = ol.StageRecord(task, state, started_ms, now_ms(),
                           _kfp_datasets(executor_input.get("inputs", {}).get("artifacts", {})),
                           _kfp_datasets(outputs or executor_input.get("outputs", {}).get("artifacts", {})),
                           error)
    events = ol.stage_events(ol.RunRecord(run_id, pipeline), stage)
    return events if state == "running" else events[1:]
