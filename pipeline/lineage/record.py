"""What bigtrain adds to MLMD after a local run: where the run's config and log are, and for a
failed stage the root-cause error (LocalDagRunner records only the FAILED state)."""

from __future__ import annotations

import re
import traceback

from ml_metadata.metadata_store.metadata_store import ListOptions, OrderByField
from ml_metadata.proto import metadata_store_pb2

from components.common.errors import (BEAM_STEP_SUFFIX, TrainingPreempted, cause_chain,
                                      in_cause_chain)

RUN_DIR, RUN_LOG, CONFIG_DIGEST = "bigtrain_run_dir", "bigtrain_log", "bigtrain_config_digest"
ERROR, ERROR_TYPE, TRACEBACK = "bigtrain_error", "bigtrain_error_type", "bigtrain_traceback"
# On an execution a dead process left RUNNING: who found it and when (see mark_abandoned).
ABANDONED_BY = "bigtrain_abandoned"
# On a FAILED execution that stopped on a preemption signal after writing its checkpoint
# (TrainingPreempted): the message. It reads as "preempted", not failed: the next run resumes it.
PREEMPTED = "bigtrain_preempted"
# On the pipeline context: the newest execution id that mark_abandoned has seen. Every execution up
# to it had finished or was recorded abandoned then (the home's lock was held), so the next run
# start reads only newer executions. A store without it (older bigtrain) is read whole, once.
SWEPT_THROUGH = "bigtrain_swept_through_execution"
# On a complete run: what it depended on (config, input files, code), for the up-to-date check.
INPUTS_KEY = "bigtrain_inputs"
# On a run: why it ran at all (what changed since the last complete run, or --force).
RUN_WHY = "bigtrain_why"
# On a partial run (--until): the last stage it ran.
UNTIL = "until"
# On a run: its tracker runs (config tracking.backends), JSON {backend: the tracker's run id}.
RUN_TRACKERS = "bigtrain_trackers"
# On a run whose Beam runner is not the DirectRunner: where each Beam stage ran and why, JSON
# [line] (pipeline.beam_stage_lines: "TextExampleGen: DaskRunner (runtime.beam_args: tcp://...)").
BEAM_PLACEMENT = "bigtrain_beam_placement"
# The MLMD property names of the run and pipeline contexts and of executions, owned here.
PROPERTIES = frozenset((RUN_DIR, RUN_LOG, CONFIG_DIGEST, ERROR, ERROR_TYPE, TRACEBACK, ABANDONED_BY,
                        PREEMPTED, SWEPT_THROUGH, INPUTS_KEY, RUN_WHY, UNTIL, RUN_TRACKERS,
                        BEAM_PLACEMENT))
# What record_run writes on a failed execution: information about the run, not its parameters.
EXECUTION_RECORD_KEYS = (ERROR, ERROR_TYPE, TRACEBACK, RUN_LOG, ABANDONED_BY, PREEMPTED)


# Exceptions that end an iteration or a generator, not a computation: never a cause a user reads
# (json's scanner raises StopIteration(index) under every JSONDecodeError).
CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit)


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of the chain as Python reports it (past Beam and TFX wrappers; not
    past `raise ... from None`), control-flow exceptions skipped: the error in its raiser's words."""
    chain = [e for e in cause_chain(exc, as_reported=True) if not isinstance(e, CONTROL_FLOW)]
    return chain[-1] if chain else exc


def is_preempted(exc: BaseException | None) -> bool:
    """True when the run stopped on a preemption signal (TrainingPreempted in its cause chain)."""
    return in_cause_chain(exc, TrainingPreempted) is not None


def error_message(exc: BaseException) -> tuple[str, str]:
    """(exception type name, message) of the root cause, without Beam's '[while running ...]'
    wrappers or re-raised 'RuntimeError: ValueError: ...' prefixes."""
    cause = root_cause(exc)
    message = BEAM_STEP_SUFFIX.sub("", str(cause)).strip()
    name = type(cause).__name__
    # Beam re-raises worker errors as "<Type>: <message>" inside another exception's text.
    match = re.match(r"^(?:[\w.]+Error|[\w.]+Exception): (.*)$", message, re.S)
    while match:
        message = match.group(1).strip()
        match = re.match(r"^(?:[\w.]+Error|[\w.]+Exception): (.*)$", message, re.S)
    return name, message


def run_context(store, run_id: str):
    """The pipeline_run context TFX created for run_id (the id runners/local/run.py gave the run)."""
    return store.get_context_by_type_and_name("pipeline_run", run_id)


def record_run(store, run_id: str, run_dir: str, log_path: str, config_digest: str,
               exc: BaseException | None = None, inputs_key: str | None = None):
    """Attach run_dir / log / config digest (and, for a complete run, the up-to-date key of what it
    depended on) to run_id's pipeline_run context and, when it failed, the root-cause error to its
    FAILED executions. Returns the run context (None when the run never reached MLMD)."""
    run = run_context(store, run_id)
    if run is None:
        return None
    run.custom_properties[RUN_DIR].string_value = run_dir
    run.custom_properties[RUN_LOG].string_value = log_path
    run.custom_properties[CONFIG_DIGEST].string_value = config_digest
    if inputs_key is not None:
        run.custom_properties[INPUTS_KEY].string_value = inputs_key
    store.put_contexts([run])
    if exc is not None:
        name, message = error_message(exc)
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]
        failed = [e for e in store.get_executions_by_context(run.id)
                  if e.last_known_state == metadata_store_pb2.Execution.FAILED]
        for execution in failed:
            execution.custom_properties[ERROR].string_value = message
            execution.custom_properties[ERROR_TYPE].string_value = name
            execution.custom_properties[TRACEBACK].string_value = text
            execution.custom_properties[RUN_LOG].string_value = log_path
            if is_preempted(exc):
                execution.custom_properties[PREEMPTED].string_value = message
        if failed:
            store.put_executions(failed)
    return run


def fail_unfinished(store, run_id: str) -> list:
    """The run's executions still RUNNING or NEW, set FAILED (a signal stopped the run's own
    process: what stopped them is known, unlike an abandoned run's); record_run then writes the
    error on them. Returns every FAILED execution of the run (TFX marks some itself), oldest
    first."""
    run = run_context(store, run_id)
    if run is None:
        return []
    Execution = metadata_store_pb2.Execution
    executions = store.get_executions_by_context(run.id)
    left = [e for e in executions if e.last_known_state in (Execution.RUNNING, Execution.NEW)]
    for execution in left:
        execution.last_known_state = Execution.FAILED
    if left:
        store.put_executions(left)
        _abandon_pending_outputs(store, left)
    return sorted((e for e in executions if e.last_known_state == Execution.FAILED),
                  key=lambda e: e.id)


def mark_abandoned(store, pipeline_name: str, note: str, previous: dict | None = None) -> list:
    """Executions of this pipeline still RUNNING (or NEW) while we hold the home's lock were left by
    a process that died (kill -9, power loss): record them as abandoned (state CANCELED plus
    ABANDONED_BY = note) and their pending outputs as ABANDONED, so they never read as running
    again. `previous`: the dead holder's lock record (its run folder and log go on its run).
    Reads only the executions newer than the pipeline's SWEPT_THROUGH mark (one run's worth on
    a healthy home): the cost does not grow with the history."""
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        return []
    Execution = metadata_store_pb2.Execution
    newer = _executions_after(store, pipeline)
    left = [e for e in newer if e.last_known_state in (Execution.RUNNING, Execution.NEW)
            and _in_context(store, e.id, pipeline.id, SWEPT_THROUGH in pipeline.custom_properties)]
    for execution in left:
        execution.last_known_state = Execution.CANCELED
        execution.custom_properties[ABANDONED_BY].string_value = note
    if left:
        store.put_executions(left)
        _abandon_pending_outputs(store, left)
        if previous and previous.get("run_id"):
            run = run_context(store, previous["run_id"])
            if run is not None and RUN_DIR not in run.custom_properties:
                run.custom_properties[RUN_DIR].string_value = previous.get("run_dir", "")
                run.custom_properties[RUN_LOG].string_value = previous.get("log", "")
                store.put_contexts([run])
    if newer:  # only after the marks above are written: a crash before re-reads them
        pipeline.custom_properties[SWEPT_THROUGH].int_value = max(e.id for e in newer)
        store.put_contexts([pipeline])
    return left


def _executions_after(store, pipeline) -> list:
    """The executions newer than the pipeline's SWEPT_THROUGH mark, read from the whole store's
    newest-first listing (by primary key: a page costs the same however long the history; a
    context's listing sorts all its executions) in growing pages until one reaches the mark.
    Without a mark: every execution of the pipeline context, once."""
    if SWEPT_THROUGH not in pipeline.custom_properties:
        return list(store.get_executions_by_context(pipeline.id))
    swept, limit = pipeline.custom_properties[SWEPT_THROUGH].int_value, 32
    while True:
        page = store.get_executions(list_options=ListOptions(
            limit=limit, order_by=OrderByField.ID, is_asc=False))
        newer = [e for e in page if e.id > swept]
        if len(newer) < len(page) or len(page) < limit:
            return newer
        limit *= 8


def _in_context(store, execution_id: int, context_id: int, check: bool) -> bool:
    """Whether the execution belongs to the context (read only when `check`: executions listed
    from the whole store may be another pipeline's, in a shared MySQL store)."""
    return not check or any(c.id == context_id for c in store.get_contexts_by_execution(execution_id))


def _abandon_pending_outputs(store, executions) -> None:
    Artifact = metadata_store_pb2.Artifact
    events = store.get_events_by_execution_ids([e.id for e in executions])
    outputs = [a for a in store.get_artifacts_by_id(sorted({ev.artifact_id for ev in events}))
               if a.state == Artifact.PENDING]
    for artifact in outputs:
        artifact.state = Artifact.ABANDONED
    if outputs:
        store.put_artifacts(outputs)
