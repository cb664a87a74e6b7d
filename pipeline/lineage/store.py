"""MLMD connection and id/event-based traversal. No filter queries: MLMD's ZetaSQL filter backend
is being removed upstream, so everything here walks contexts, executions and events by id."""

from __future__ import annotations

import functools
import os
from typing import Callable

from ml_metadata import metadata_store
from ml_metadata.metadata_store.metadata_store import ListOptions, OrderByField
from ml_metadata.proto import metadata_store_pb2

from components.push import properties as push_props
from components.common.errors import NotFoundError
from components.storage.fs import is_remote
from components.push.layout import read_push_record
from pipeline.lineage import event_table, record

Event = metadata_store_pb2.Event
Execution = metadata_store_pb2.Execution
INPUTS = (Event.INPUT, Event.DECLARED_INPUT, Event.INTERNAL_INPUT)
OUTPUTS = (Event.OUTPUT, Event.DECLARED_OUTPUT, Event.INTERNAL_OUTPUT)
# The one state vocabulary of `bigtrain lineage` and the run report. "abandoned": the execution was
# left RUNNING by a process that died (recorded so by the next run on the home, see record.py).
STATE_WORDS = {Execution.COMPLETE: "complete", Execution.CACHED: "cached", Execution.FAILED: "failed",
               Execution.RUNNING: "running", Execution.NEW: "new", Execution.CANCELED: "canceled"}
ABANDONED = "abandoned"
# "preempted": FAILED in MLMD, but stopped on SIGTERM/SIGINT with a checkpoint (record.PREEMPTED).
PREEMPTED = "preempted"


def value_of(value: metadata_store_pb2.Value):
    kind = value.WhichOneof("value")
    if kind in ("int_value", "double_value", "string_value", "bool_value"):
        return getattr(value, kind)
    return str(getattr(value, kind)) if kind else None


def properties(obj, custom_only: bool = False) -> dict:
    """An artifact's, execution's or context's properties and custom properties as plain values
    (custom_only: just the custom ones, where TFX keeps execution parameters)."""
    out = {} if custom_only else {key: value_of(v) for key, v in obj.properties.items()}
    out.update({key: value_of(v) for key, v in obj.custom_properties.items()})
    return out


# MLMD ids are int64: a larger number (an address typed by hand) is no id of this store, and MLMD
# itself answers it with a raw "Value out of range" error.
MAX_ID = 2 ** 63 - 1


def _check_id(kind: str, value: int) -> int:
    if not 0 < value <= MAX_ID:
        raise NotFoundError(f"no {kind} with id {value}")
    return value


def _per_instance(method: Callable) -> Callable:
    """Memoize a method in its own instance (a dict on self, by arguments): the cache dies with
    the Lineage, where functools.lru_cache on a method would keep every instance (and its store)
    alive in one class-wide cache."""
    name = method.__name__

    @functools.wraps(method)
    def cached(self, *args):
        memo = self.__dict__.setdefault("_memo", {}).setdefault(name, {})
        if args not in memo:
            memo[args] = method(self, *args)
        return memo[args]
    return cached


def _same_location(a: str, b: str) -> bool:
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.normpath(a) == os.path.normpath(b)


class Lineage:
    """Cached reads of one store, keyed by ids."""

    def __init__(self, store: metadata_store.MetadataStore, live_writer: bool | None = None):
        """live_writer: whether a live process holds the home (runners/local/lock.py). False: executions
        still RUNNING were left by a dead process and read as abandoned; None: unknown (e.g. MySQL
        without --home), they read as running until the next run records them abandoned."""
        self.store = store
        self.live_writer = live_writer
        self._artifacts: dict[int, object] = {}
        self._events_by_execution: dict[int, tuple] = {}
        self._executions: dict[int, object] = {}

    # -- runs and nodes -----------------------------------------------------------------------
    # Every read here goes by id, context or event and costs the same with 10 runs or 10,000 in
    # the store (benchmarks/lineage_speed.py): no question lists every run or execution.
    @functools.cached_property
    def node_of(self) -> "_NodeNames":
        """execution id -> node id (e.g. 'Trainer'), read per execution from its node context
        (IR-based runners: local, Kubeflow) or component_run context (TFX's Airflow runner)."""
        return _NodeNames(self)

    @_per_instance
    def contexts_of_execution(self, execution_id: int) -> tuple:
        return tuple(self.store.get_contexts_by_execution(execution_id))

    @functools.cached_property
    def _node_by_type(self) -> dict[int, object]:
        """execution type id -> node context, for the types exactly one node's newest execution
        has. MLMD keeps no index on Association.execution_id (reading an execution's contexts
        scans every association: 15 ms at 10,000 runs), so a node is found by its execution's
        type; types shared by several nodes (two Resolvers) or unknown here (older code) are
        looked up by the execution's contexts."""
        by_type: dict[int, list] = {}
        for ctx in self.store.get_contexts_by_type("node"):
            newest = self.store.get_executions_by_context(ctx.id, list_options=ListOptions(
                limit=1, order_by=OrderByField.ID, is_asc=False))
            for execution in newest:
                by_type.setdefault(execution.type_id, []).append(ctx)
        return {type_id: ctxs[0] for type_id, ctxs in by_type.items() if len(ctxs) == 1}

    def node_context(self, execution_id: int):
        """The execution's node context ('<pipeline>.<node>'; '<pipeline>.<run>.<node>' for
        component_run), or None."""
        by_execution_type = self._node_by_type.get(self.execution(execution_id).type_id)
        if by_execution_type is not None:
            return by_execution_type
        by_type = {self._context_type_name(c.type_id): c for c in self.contexts_of_execution(execution_id)}
        return by_type.get("node") or by_type.get("component_run")

    @_per_instance
    def _context_type_name(self, type_id: int) -> str:
        return self.store.get_context_types_by_id([type_id])[0].name

    def runs_page(self, offset: int = 0, limit: int | None = 20) -> list:
        """Run contexts ('pipeline_run', or 'run' from TFX's Airflow runner), newest first:
        `limit` of them after skipping `offset` (None: all). Read newest-first with MLMD's
        ordered listing, so a page costs the same however long the history."""
        want = None if limit is None else offset + limit
        fetch = None if want is None else want + 64  # pipeline and node contexts are interleaved
        while True:
            contexts = self.store.get_contexts(list_options=ListOptions(
                limit=fetch, order_by=OrderByField.CREATE_TIME, is_asc=False))
            runs = [c for c in contexts if c.type_id in self.run_type_ids]
            if fetch is None or len(contexts) < fetch or len(runs) >= want:
                runs.sort(key=lambda c: (c.create_time_since_epoch, c.id), reverse=True)
                return runs[offset:want]
            fetch *= 4

    def runs(self) -> list:
        """Every run context, newest first (a whole-history listing: prefer runs_page)."""
        return self.runs_page(0, None)

    def run(self, ref: str | None):
        """A run by id, unique id prefix, 'latest' or 'latest~N' (N runs before the newest)."""
        ref = ref or "latest"
        if ref == "latest" or ref.startswith("latest~"):
            back = ref.split("~", 1)[1] if "~" in ref else "0"
            if not back.isdigit():
                raise NotFoundError(f"run {ref!r}: latest~N takes a whole number N")
            back = int(back)
            runs = self.runs_page(back, 1)
            if not runs:
                total = len(self.runs_page(0, back))
                raise NotFoundError("no pipeline runs recorded in this metadata store" if not total
                                    else f"{ref}: only {total} runs recorded")
            return runs[0]
        for type_name in ("pipeline_run", "run"):  # the exact id: one indexed lookup
            found = self.store.get_context_by_type_and_name(type_name, ref)
            if found is not None:
                return found
        matches = [r for r in self.runs() if r.name.startswith(ref)]  # a prefix: lists the names
        if len(matches) != 1:
            raise NotFoundError(f"run {ref!r} {'is ambiguous' if matches else 'not found'}; "
                                f"see `bigtrain lineage runs`")
        return matches[0]

    @_per_instance
    def _executions_of(self, run_id: int) -> tuple:
        executions = tuple(sorted(self.store.get_executions_by_context(run_id), key=lambda e: e.id))
        self._executions.update({e.id: e for e in executions})
        return executions

    def executions_of(self, run) -> list:
        return list(self._executions_of(run.id))

    def previous_execution(self, execution):
        """The newest execution of the same node before this one (None for the first), read from
        the node's context newest first in growing pages (recent runs: one small page)."""
        node = self.node_context(execution.id)
        if node is None:
            return None
        limit = 16
        while True:
            page = self.store.get_executions_by_context(node.id, list_options=ListOptions(
                limit=limit, order_by=OrderByField.ID, is_asc=False))
            earlier = [e for e in page if e.id < execution.id]
            if earlier:
                return max(earlier, key=lambda e: e.id)
            if len(page) < limit:
                return None
            limit *= 8

    def runs_of_execution(self, execution_id: int) -> list[str]:
        return [c.name for c in self.contexts_of_execution(execution_id)
                if c.type_id in self.run_type_ids]

    @functools.cached_property
    def run_type_ids(self) -> set[int]:
        return {t.id for t in self.store.get_context_types() if t.name in ("pipeline_run", "run")}

    # -- artifacts, executions, events --------------------------------------------------------
    def artifact(self, artifact_id: int):
        _check_id("artifact", artifact_id)
        if artifact_id not in self._artifacts:
            found = self.store.get_artifacts_by_id([artifact_id])
            if not found:
                raise NotFoundError(f"no artifact with id {artifact_id}")
            self._artifacts[artifact_id] = found[0]
        return self._artifacts[artifact_id]

    def execution(self, execution_id: int):
        _check_id("execution", execution_id)
        if execution_id not in self._executions:
            found = self.store.get_executions_by_id([execution_id])
            if not found:
                raise NotFoundError(f"no execution with id {execution_id}")
            self._executions[execution_id] = found[0]
        return self._executions[execution_id]

    def executions(self, execution_ids) -> list:
        """Many executions in one read (those not read before), in the order asked."""
        missing = [i for i in execution_ids if i not in self._executions and 0 < i <= MAX_ID]
        if missing:
            self._executions.update({e.id: e for e in self.store.get_executions_by_id(missing)})
        return [self._executions[i] for i in execution_ids if i in self._executions]

    @_per_instance
    def type_name(self, type_id: int) -> str:
        return self.store.get_artifact_types_by_id([type_id])[0].name

    def artifact_type(self, artifact) -> str:
        return self.type_name(artifact.type_id)

    def _events_of_execution(self, execution_id: int) -> tuple:
        if execution_id not in self._events_by_execution:
            self.prefetch([execution_id])
        return self._events_by_execution[execution_id]

    def prefetch(self, execution_ids) -> None:
        """Read the events and artifacts of many executions in two queries (a page of runs)."""
        wanted = [i for i in execution_ids if i not in self._events_by_execution]
        if not wanted:
            return
        events: dict[int, list] = {i: [] for i in wanted}
        for event in self.store.get_events_by_execution_ids(wanted):
            events[event.execution_id].append(event)
        self._events_by_execution.update({i: tuple(v) for i, v in events.items()})
        missing = sorted({e.artifact_id for v in events.values() for e in v} - set(self._artifacts))
        if missing:
            self._artifacts.update({a.id: a for a in self.store.get_artifacts_by_id(missing)})

    @_per_instance
    def _artifact_events(self, artifact_id: int) -> tuple[tuple[int, int, int | None], ...]:
        """(execution id, event type, the execution's state, None if not read) of every event
        on the artifact: one indexed query on a sqlite or MySQL store of a known schema version
        (event_table.py: a shared artifact has an event per run), else MLMD's read of the events."""
        rows = event_table.artifact_events(self.store, artifact_id)
        if rows is None:
            rows = tuple((e.execution_id, e.type, None)
                         for e in self.store.get_events_by_artifact_ids([artifact_id]))
        return rows

    def _keyed(self, execution_id: int, types) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for event in self._events_of_execution(execution_id):
            if event.type in types:
                key = event.path.steps[0].key if event.path.steps else "?"
                out.setdefault(key, []).append(event.artifact_id)
        return {k: sorted(v) for k, v in out.items()}

    def inputs(self, execution_id: int) -> dict[str, list[int]]:
        return self._keyed(execution_id, INPUTS)

    def outputs(self, execution_id: int) -> dict[str, list[int]]:
        return self._keyed(execution_id, OUTPUTS)

    @_per_instance
    def _ends(self, artifact_id: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(emitters, consumers) of the artifact, oldest first, from one read of its events
        (a shared artifact has tens of thousands: sorted once, not per question)."""
        rows = self._artifact_events(artifact_id)
        return (tuple(sorted({e for e, kind, _ in rows if kind in OUTPUTS})),
                tuple(sorted({e for e, kind, _ in rows if kind in INPUTS})))

    def emitters(self, artifact_id: int) -> list[int]:
        """Every execution with an output event on the artifact, oldest first: the one that made
        it, then each cached execution that re-emitted it (TFX records a cache hit so)."""
        return list(self._ends(artifact_id)[0])

    def producer(self, artifact_id: int) -> int | None:
        """The execution that created the artifact (cached executions re-emit it; the first wins)."""
        ids = self.emitters(artifact_id)
        return ids[0] if ids else None

    def consumers(self, artifact_id: int) -> list[int]:
        return list(self._ends(artifact_id)[1])

    def readers(self, artifact_id: int) -> tuple[list[int], list[int]]:
        """(executions that read the artifact and ran, cached ones that only re-emitted the
        outputs of an earlier run), oldest first; every reader's state read in one query."""
        ran, cached = self._readers(artifact_id)
        return list(ran), list(cached)

    @_per_instance
    def _readers(self, artifact_id: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        ids = self._ends(artifact_id)[1]
        states = {e: state for e, _, state in self._artifact_events(artifact_id) if state is not None}
        states.update((e.id, e.last_known_state) for e in self.executions(
            [i for i in ids if i not in states]))
        cached = {e for e in ids if states.get(e) == Execution.CACHED}
        return tuple(e for e in ids if e not in cached), tuple(e for e in ids if e in cached)

    def state(self, execution) -> str:
        if record.ABANDONED_BY in execution.custom_properties:
            return ABANDONED
        if record.PREEMPTED in execution.custom_properties:
            return PREEMPTED
        if self.live_writer is False and execution.last_known_state in (Execution.RUNNING, Execution.NEW):
            return ABANDONED
        return STATE_WORDS.get(execution.last_known_state, "unknown")

    def _pushed_by_record(self, version_dir: str):
        """The PushedModel of a pushed version directory, by events: the push record the Pusher
        leaves in it names the Model (components/push/push.py), whose Pusher executions' outputs
        say where they pushed. None without a readable record."""
        try:
            model_id = int(read_push_record(version_dir)["model_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        for execution_id in reversed(self.readers(model_id)[0]):  # a cached push re-emits
            for ids in self.outputs(execution_id).values():
                for artifact_id in ids:
                    artifact = self.artifact(artifact_id)
                    destination = properties(artifact).get(push_props.PUSHED_DESTINATION, "")
                    if destination and _same_location(destination, version_dir):
                        return artifact
        return None

    def find_artifact(self, target: str):
        """An artifact by id, by URI, or a pushed model version directory."""
        if target.isdigit():
            return self.artifact(int(target))
        # A URI (s3://, gs://) is matched as written (never looked up on the local disk).
        path = os.path.abspath(target) if "://" not in target and os.path.exists(target) else target
        if not _utf8(path):   # a non-UTF-8 file name (surrogate escapes): no MLMD URI can be it
            raise NotFoundError(f"{target!r} is not an artifact (its name is not UTF-8)")
        found = self.store.get_artifacts_by_uri(path) or self.store.get_artifacts_by_uri(target)
        if found:
            return sorted(found, key=lambda a: a.id)[0]
        by_record = self._pushed_by_record(path)
        if by_record is not None:
            return by_record
        for pushed in self.store.get_artifacts_by_type("PushedModel"):  # no push record: a scan
            destination = properties(pushed).get(push_props.PUSHED_DESTINATION, "")
            if destination and _same_location(destination, path):
                return pushed
        raise NotFoundError(f"{target!r} is not an artifact id, an artifact URI or a pushed model "
                            "directory known to this metadata store")


class _NodeNames:
    """node_of's mapping: execution id -> node id, one context read per execution (cached)."""

    def __init__(self, lin: Lineage):
        self._lin = lin

    def get(self, execution_id: int, default=None):
        ctx = self._lin.node_context(execution_id)
        if ctx is None:
            return default
        if self._lin._context_type_name(ctx.type_id) == "component_run":
            return ctx.name.rsplit(".", 1)[-1]
        return ctx.name.split(".", 1)[-1]

    def __getitem__(self, execution_id: int) -> str:
        name = self.get(execution_id)
        if name is None:
            raise KeyError(execution_id)
        return name


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
