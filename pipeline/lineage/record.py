"""What bigtrain adds to MLMD after a local run: where the run's config and log are, and for a
failed stage the root-cause error (LocalDagRunner records only the FAILED state)."""

from __future__ import annotations

import re
import traceback

from ml_metadata.proto import metadata_store_pb2

RUN_DIR, RUN_LOG, CONFIG_DIGEST = "bigtrain_run_dir", "bigtrain_log", "bigtrain_config_digest"
ERROR, ERROR_TYPE, TRACEBACK = "bigtrain_error", "bigtrain_error_type", "bigtrain_traceback"
# What record_run writes on a failed execution: information about the run, not its parameters.
EXECUTION_RECORD_KEYS = (ERROR, ERROR_TYPE, TRACEBACK, RUN_LOG)
_BEAM_SUFFIX = re.compile(r"\s*\[while running '[^']*'\]")


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of the __cause__ / __context__ chain (past Beam and TFX wrappers)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            break
        exc = nxt
    return exc


def error_message(exc: BaseException) -> tuple[str, str]:
    """(exception type name, message) of the root cause, without Beam's '[while running ...]'
    wrappers or re-raised 'RuntimeError: ValueError: ...' prefixes."""
    cause = root_cause(exc)
    message = _BEAM_SUFFIX.sub("", str(cause)).strip()
    name = type(cause).__name__
    # Beam re-raises worker errors as "<Type>: <message>" inside another exception's text.
    match = re.match(r"^(?:[\w.]+Error|[\w.]+Exception): (.*)$", message, re.S)
    while match:
        message = match.group(1).strip()
        match = re.match(r"^(?:[\w.]+Error|[\w.]+Exception): (.*)$", message, re.S)
    return name, message


def newest_run(store, started_ms: float):
    """The newest run context, if it was created after started_ms (i.e. by this invocation)."""
    from pipeline.lineage.store import Lineage
    runs = Lineage(store).runs()
    return runs[0] if runs and runs[0].create_time_since_epoch >= started_ms - 1000 else None


def record_run(store, started_ms: float, run_dir: str, log_path: str, config_digest: str,
               exc: BaseException | None = None):
    """Attach run_dir / log / config digest to this invocation's pipeline_run context and, when
    it failed, the root-cause error to its FAILED executions. Returns the run context."""
    run = newest_run(store, started_ms)
    if run is None:
        return None
    run.custom_properties[RUN_DIR].string_value = run_dir
    run.custom_properties[RUN_LOG].string_value = log_path
    run.custom_properties[CONFIG_DIGEST].string_value = config_digest
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
        if failed:
            store.put_executions(failed)
    return run
