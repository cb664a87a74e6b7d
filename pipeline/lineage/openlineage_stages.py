"""A run's stages as openlineage_events records, read from MLMD: each execution of the run (not
the resolvers) with its state, times, input and output artifacts and, for a failed one, the
error record.py wrote on it. The same reads serve the local runner (every stage, after the run)
and an Airflow or Kubeflow task (its own stage)."""

from __future__ import annotations

from pipeline.lineage import record
from pipeline.lineage.openlineage_events import DatasetRecord, RunRecord, StageRecord
from pipeline.lineage.store import Lineage, properties


def run_record(lin: Lineage, run, pipeline: str) -> RunRecord:
    """The pipeline run (an MLMD run context) as a RunRecord."""
    digest = run.custom_properties.get(record.CONFIG_DIGEST)
    return RunRecord(run_id=run.name, pipeline=pipeline,
                     config_digest=digest.string_value if digest is not None else None)


def _datasets(lin: Lineage, keyed: dict[str, list[int]]) -> tuple[DatasetRecord, ...]:
    out, seen = [], set()
    for key in sorted(keyed):
        for artifact_id in keyed[key]:
            artifact = lin.artifact(artifact_id)
            if artifact.uri and artifact.uri not in seen:
                seen.add(artifact.uri)
                out.append(DatasetRecord(uri=artifact.uri, type=lin.artifact_type(artifact),
                                         properties=properties(artifact)))
    return tuple(out)


def stage_record(lin: Lineage, execution) -> StageRecord:
    """One execution as a StageRecord (error: the '<Type>: <message>' record.py stored)."""
    custom = properties(execution, custom_only=True)
    error = custom.get(record.ERROR)
    if error is not None and custom.get(record.ERROR_TYPE):
        error = f"{custom[record.ERROR_TYPE]}: {error}"
    return StageRecord(
        node=lin.node_of.get(execution.id, str(execution.id)), state=lin.state(execution),
        started_ms=execution.create_time_since_epoch, ended_ms=execution.last_update_time_since_epoch,
        inputs=_datasets(lin, lin.inputs(execution.id)), outputs=_datasets(lin, lin.outputs(execution.id)),
        error=error, stack_trace=custom.get(record.TRACEBACK))


def stage_records(lin: Lineage, run, node: str | None = None) -> list[StageRecord]:
    """The run's stages, oldest first (node: that stage's only); resolvers are no stages."""
    executions = lin.executions_of(run)
    lin.prefetch([e.id for e in executions])
    stages = [stage_record(lin, e) for e in executions
              if not lin.node_of.get(e.id, "").endswith("resolver")]
    return [s for s in stages if node is None or s.node == node]
