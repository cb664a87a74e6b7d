"""MLMD connection and id/event-based traversal. No filter queries: MLMD's ZetaSQL filter backend
is being removed upstream, so everything here walks contexts, executions and events by id."""

from __future__ import annotations

import contextlib
import functools
import json
import os

from ml_metadata import errors, metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.common.errors import MetadataStoreError
from pipeline.lineage import record

Event = metadata_store_pb2.Event
Execution = metadata_store_pb2.Execution
INPUTS = (Event.INPUT, Event.DECLARED_INPUT, Event.INTERNAL_INPUT)
OUTPUTS = (Event.OUTPUT, Event.DECLARED_OUTPUT, Event.INTERNAL_OUTPUT)
# The one state vocabulary of `bigtrain lineage` and the run report. "abandoned": the execution was
# left RUNNING by a process that died (recorded so by the next run on the home, see record.py).
STATE_WORDS = {Execution.COMPLETE: "complete", Execution.CACHED: "cached", Execution.FAILED: "failed",
               Execution.RUNNING: "running", Execution.NEW: "new", Execution.CANCELED: "canceled"}
ABANDONED = "abandoned"


def connection_config(sqlite_path: str | None = None, *, read_only: bool = True,
                      mysql_host: str | None = None, mysql_port: int = 3306,
                      mysql_database: str | None = None, mysql_user: str | None = None,
                      mysql_password: str | None = None) -> metadata_store_pb2.ConnectionConfig:
    """MLMD's connection to a sqlite file (read-only unless asked) or to a MySQL/MariaDB server."""
    config = metadata_store_pb2.ConnectionConfig()
    if mysql_host:
        config.mysql.host, config.mysql.port = mysql_host, mysql_port
        config.mysql.database = mysql_database or "metadb"
        config.mysql.user = mysql_user or "root"
        if mysql_password:
            config.mysql.password = mysql_password
    else:
        config.sqlite.filename_uri = sqlite_path
        modes = metadata_store_pb2.SqliteMetadataSourceConfig
        config.sqlite.connection_mode = (modes.READONLY if read_only
                                         else modes.READWRITE_OPENCREATE)
    return config


def describe(config: metadata_store_pb2.ConnectionConfig) -> str:
    if config.HasField("mysql"):
        return f"MySQL {config.mysql.user}@{config.mysql.host}:{config.mysql.port}/{config.mysql.database}"
    return config.sqlite.filename_uri


def check_sqlite(path: str, *, must_exist: bool = True) -> None:
    """Named errors for a sqlite store that MLMD would only report as a raw query error: missing,
    empty or truncated, not a database, damaged, or locked by another process. Reads only (a
    read-only connection with a short busy timeout: never waits on a writer for long)."""
    import sqlite3
    if not os.path.exists(path):
        if must_exist:
            raise MetadataStoreError(f"no metadata database at {path} (run `bigtrain run` first, or "
                                     "pass --home or --metadata)")
        return
    size = os.path.getsize(path)
    if size == 0:
        raise MetadataStoreError(f"metadata store {path} is empty (0 bytes: truncated?); move it "
                                 "aside to start a new lineage history, or restore it from a backup")
    with open(path, "rb") as fh:
        header = fh.read(100)
    if not header.startswith(b"SQLite format 3\0"):
        raise MetadataStoreError(f"metadata store {path} is not an SQLite database (corrupt or "
                                 "overwritten); move it aside or restore it from a backup")
    if len(header) == 100:  # header: page size at 16, database size in pages at 28
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        if pages and size < page_size * pages:
            raise MetadataStoreError(
                f"metadata store {path} is truncated ({size} bytes, its header says "
                f"{page_size * pages}); move it aside or restore it from a backup")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)) as db:
            result = db.execute("PRAGMA quick_check").fetchone()
    except sqlite3.OperationalError as err:
        if "locked" in str(err) or "busy" in str(err):
            raise MetadataStoreError(
                f"metadata store {path} is locked by another process ({err}); bigtrain runs take "
                "<home>/.bigtrain.lock instead, so this is another program holding a write "
                "transaction: close it and retry") from None
        raise MetadataStoreError(f"metadata store {path} cannot be read: {err}") from None
    except sqlite3.DatabaseError as err:
        raise MetadataStoreError(f"metadata store {path} is damaged ({err}); move it aside or "
                                 "restore it from a backup") from None
    if result and result[0] != "ok":
        raise MetadataStoreError(f"metadata store {path} is damaged (sqlite quick_check: "
                                 f"{result[0]}); move it aside or restore it from a backup")


def open_store(config: metadata_store_pb2.ConnectionConfig) -> metadata_store.MetadataStore:
    """MetadataStore(config), its failures as named errors (exit code 5) instead of MLMD's raw
    'Error when executing query' RuntimeErrors."""
    if config.HasField("sqlite"):
        check_sqlite(config.sqlite.filename_uri, must_exist=config.sqlite.connection_mode
                     == metadata_store_pb2.SqliteMetadataSourceConfig.READONLY)
    try:
        store = metadata_store.MetadataStore(config)
        store.get_context_types()  # MySQL connects lazily in places: fail here, named
        return store
    except (RuntimeError, errors.StatusError) as err:
        raise MetadataStoreError(f"metadata store {describe(config)}: {err}") from None


def connect(sqlite_path: str | None = None, *, read_only: bool = True, mysql_host: str | None = None,
            mysql_port: int = 3306, mysql_database: str | None = None,
            mysql_user: str | None = None,
            mysql_password: str | None = None) -> metadata_store.MetadataStore:
    """An existing sqlite store (read-only unless asked), or a MySQL one (shared deployments)."""
    return open_store(connection_config(
        sqlite_path, read_only=read_only, mysql_host=mysql_host, mysql_port=mysql_port,
        mysql_database=mysql_database, mysql_user=mysql_user, mysql_password=mysql_password))


def value_of(value: metadata_store_pb2.Value):
    kind = value.WhichOneof("value")
    if kind in ("int_value", "double_value", "string_value", "bool_value"):
        return getattr(value, kind)
    return str(getattr(value, kind)) if kind else None


def flatten(value, prefix: str = "") -> dict:
    """Nested dicts and JSON strings -> {dotted.key: scalar}, to name exactly what changed."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def changed_parameters(before: dict, after: dict) -> list[tuple[str, object, object]]:
    """(dotted key, before, after) for every execution parameter that differs, flattened into
    JSON-encoded configs. TFX's internal keys (`__*`) and the failure record bigtrain adds after a
    run (bigtrain_error, ...) are not parameters."""
    def parameters(props):
        return flatten({k: v for k, v in props.items()
                        if not k.startswith("__") and k not in record.EXECUTION_RECORD_KEYS})
    flat_before, flat_after = parameters(before), parameters(after)
    return [(k, flat_before.get(k), flat_after.get(k))
            for k in sorted(set(flat_before) | set(flat_after))
            if flat_before.get(k) != flat_after.get(k)]


def properties(obj, custom_only: bool = False) -> dict:
    """An artifact's, execution's or context's properties and custom properties as plain values
    (custom_only: just the custom ones, where TFX keeps execution parameters)."""
    out = {} if custom_only else {key: value_of(v) for key, v in obj.properties.items()}
    out.update({key: value_of(v) for key, v in obj.custom_properties.items()})
    return out


def _same_location(a: str, b: str) -> bool:
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return os.path.normpath(a) == os.path.normpath(b)


class Lineage:
    """Cached reads of one store, keyed by ids."""

    def __init__(self, store: metadata_store.MetadataStore, live_writer: bool | None = None):
        """live_writer: whether a live process holds the home (runners/lock.py). False: executions
        still RUNNING were left by a dead process and read as abandoned; None: unknown (e.g. MySQL
        without --home), they read as running until the next run records them abandoned."""
        self.store = store
        self.live_writer = live_writer

    # -- runs and nodes -----------------------------------------------------------------------
    @functools.cached_property
    def node_of(self) -> dict[int, str]:
        """execution id -> node id (e.g. 'Trainer'), through the node contexts (IR-based runners:
        local, Kubeflow) or the component_run contexts (TFX's Airflow runner)."""
        out = {}
        for ctx in self.store.get_contexts_by_type("node"):          # "<pipeline>.<node>"
            for execution in self.store.get_executions_by_context(ctx.id):
                out[execution.id] = ctx.name.split(".", 1)[-1]
        for ctx in self.store.get_contexts_by_type("component_run"):  # "<pipeline>.<run>.<node>"
            for execution in self.store.get_executions_by_context(ctx.id):
                out.setdefault(execution.id, ctx.name.rsplit(".", 1)[-1])
        return out

    def runs(self) -> list:
        """Pipeline run contexts ('pipeline_run', or 'run' from TFX's Airflow runner), newest first."""
        runs = self.store.get_contexts_by_type("pipeline_run") + self.store.get_contexts_by_type("run")
        return sorted(runs, key=lambda c: (c.create_time_since_epoch, c.id), reverse=True)

    def run(self, ref: str | None):
        """A run by id, unique id prefix, 'latest' or 'latest~N' (N runs before the newest)."""
        runs = self.runs()
        if not runs:
            raise LookupError("no pipeline runs recorded in this metadata store")
        ref = ref or "latest"
        if ref == "latest" or ref.startswith("latest~"):
            back = int(ref.split("~", 1)[1]) if "~" in ref else 0
            if back >= len(runs):
                raise LookupError(f"{ref}: only {len(runs)} runs recorded")
            return runs[back]
        exact = [r for r in runs if r.name == ref]
        matches = exact or [r for r in runs if r.name.startswith(ref)]
        if len(matches) != 1:
            raise LookupError(f"run {ref!r} {'is ambiguous' if matches else 'not found'}; "
                              f"see `bigtrain lineage runs`")
        return matches[0]

    def executions_of(self, run) -> list:
        return sorted(self.store.get_executions_by_context(run.id), key=lambda e: e.id)

    def runs_of_execution(self, execution_id: int) -> list[str]:
        return [c.name for c in self.store.get_contexts_by_execution(execution_id)
                if c.type_id in self._run_type_ids]

    @functools.cached_property
    def _run_type_ids(self) -> set[int]:
        return {t.id for t in self.store.get_context_types() if t.name in ("pipeline_run", "run")}

    # -- artifacts, executions, events --------------------------------------------------------
    @functools.lru_cache(maxsize=None)
    def artifact(self, artifact_id: int):
        found = self.store.get_artifacts_by_id([artifact_id])
        if not found:
            raise LookupError(f"no artifact with id {artifact_id}")
        return found[0]

    @functools.lru_cache(maxsize=None)
    def execution(self, execution_id: int):
        return self.store.get_executions_by_id([execution_id])[0]

    @functools.lru_cache(maxsize=None)
    def type_name(self, type_id: int) -> str:
        return self.store.get_artifact_types_by_id([type_id])[0].name

    def artifact_type(self, artifact) -> str:
        return self.type_name(artifact.type_id)

    @functools.lru_cache(maxsize=None)
    def _events_of_execution(self, execution_id: int) -> tuple:
        return tuple(self.store.get_events_by_execution_ids([execution_id]))

    @functools.lru_cache(maxsize=None)
    def _events_of_artifact(self, artifact_id: int) -> tuple:
        return tuple(self.store.get_events_by_artifact_ids([artifact_id]))

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

    def producer(self, artifact_id: int) -> int | None:
        """The execution that created the artifact (cached executions re-emit it; the first wins)."""
        ids = sorted(e.execution_id for e in self._events_of_artifact(artifact_id) if e.type in OUTPUTS)
        return ids[0] if ids else None

    def consumers(self, artifact_id: int) -> list[int]:
        return sorted({e.execution_id for e in self._events_of_artifact(artifact_id) if e.type in INPUTS})

    def state(self, execution) -> str:
        if record.ABANDONED_BY in execution.custom_properties:
            return ABANDONED
        if self.live_writer is False and execution.last_known_state in (Execution.RUNNING, Execution.NEW):
            return ABANDONED
        return STATE_WORDS.get(execution.last_known_state, "unknown")

    def find_artifact(self, target: str):
        """An artifact by id, by URI, or a pushed model version directory."""
        if target.isdigit():
            return self.artifact(int(target))
        # A URI (s3://, gs://) is matched as written (never looked up on the local disk).
        path = os.path.abspath(target) if "://" not in target and os.path.exists(target) else target
        found = self.store.get_artifacts_by_uri(path) or self.store.get_artifacts_by_uri(target)
        if found:
            return sorted(found, key=lambda a: a.id)[0]
        for pushed in self.store.get_artifacts_by_type("PushedModel"):
            destination = properties(pushed).get("pushed_destination", "")
            if destination and _same_location(destination, path):
                return pushed
        raise LookupError(f"{target!r} is not an artifact id, an artifact URI or a pushed model "
                          "directory known to this metadata store")
